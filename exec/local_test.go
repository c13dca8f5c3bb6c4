package exec

import (
	"testing"
)

func localFixture() fixture {
	return fixture{
		new: func(t *testing.T, opts Options) (*Backend, string) {
			dir := t.TempDir()
			b, err := NewLocal(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := b.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			return b, dir
		},
		alive: func(t *testing.T, _ *Backend, pid int) bool {
			state, _, ok := procStat(pid)
			return ok && state != 'Z' && state != 'X'
		},
	}
}

func TestLocal(t *testing.T) { testBackend(t, localFixture()) }
