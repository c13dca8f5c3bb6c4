package exec

import (
	"context"
	"testing"
	"time"
)

// testCtx bounds every command of a test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustExec(t *testing.T, b *Backend, req Request) *Result {
	t.Helper()
	res, err := b.Exec(testCtx(t), req)
	if err != nil {
		t.Fatalf("Exec(%s): %v", req.display(), err)
	}
	return res
}

func sh(cmd string) Request { return Request{Command: cmd} }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
