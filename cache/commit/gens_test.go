package commit

import (
	"strings"
	"testing"
)

// TestGensCheckInvariants: the invariants hold for bumped blocks that are
// dirty, and a generation shared, above the sequence, or naming a block
// that is not dirty is caught.
func TestGensCheckInvariants(t *testing.T) {
	dirtySet := map[BlockKey]bool{{1, 0}: true, {1, 1}: true}
	dirty := func(ino, b uint64) (bool, error) { return dirtySet[BlockKey{ino, b}], nil }
	var g Gens
	g.Bump(1, 0)
	g.Bump(1, 1)
	if err := g.CheckInvariants(dirty); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mess func()
		want string
	}{
		{"shared", func() { g.m[BlockKey{1, 1}] = g.m[BlockKey{1, 0}] }, "share generation"},
		{"above the sequence", func() { g.m[BlockKey{1, 1}] = g.seq.Load() + 1 }, "sequence at"},
		{"not dirty", func() { delete(dirtySet, BlockKey{1, 1}) }, "not dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g = Gens{}
			dirtySet = map[BlockKey]bool{{1, 0}: true, {1, 1}: true}
			g.Bump(1, 0)
			g.Bump(1, 1)
			tc.mess()
			if err := g.CheckInvariants(dirty); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckInvariants = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
