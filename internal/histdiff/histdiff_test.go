package histdiff

import (
	"encoding/json"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// TestSummaryTypeChange: a path that changed between a directory and a
// file is one modification of a file, counted once, whether the change
// comes straight from the differ or decoded from JSON (the control
// socket); a directory's own changes are not counted.
func TestSummaryTypeChange(t *testing.T) {
	dir := &snapshot.Entry{Type: snapshot.TypeDir, Mode: 0o755}
	file := &snapshot.Entry{Type: snapshot.TypeFile, Mode: 0o644, Size: 10}
	dir2 := &snapshot.Entry{Type: snapshot.TypeDir, Mode: 0o700}
	what := snapshot.ChangedType | snapshot.ChangedMode
	changes := []snapshot.Change{
		{Op: snapshot.Modified, Path: "d2f", Old: dir, New: file, What: what},
		{Op: snapshot.Modified, Path: "f2d", Old: file, New: dir, What: what},
		{Op: snapshot.Modified, Path: "d", Old: dir, New: dir2, What: snapshot.ChangedMode},
	}
	for _, viaJSON := range []bool{false, true} {
		var sum Summary
		var dirOnly []bool
		for _, sc := range changes {
			c := FromSnapshot(sc)
			if viaJSON {
				b, err := json.Marshal(c)
				if err != nil {
					t.Fatal(err)
				}
				c = Change{}
				if err := json.Unmarshal(b, &c); err != nil {
					t.Fatal(err)
				}
			}
			dirOnly = append(dirOnly, c.DirOnly())
			sum.Add(c)
		}
		if dirOnly[0] || dirOnly[1] || !dirOnly[2] {
			t.Errorf("json %v: DirOnly of dir->file, file->dir, dir = %v, want false, false, true", viaJSON, dirOnly)
		}
		if want := (Summary{Modified: 2, Grown: 10, Shrunk: 10}); sum != want {
			t.Errorf("json %v: summary %+v, want %+v", viaJSON, sum, want)
		}
	}
}
