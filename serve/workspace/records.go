package workspace

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentfs/agentfs/exec"
)

// Record states.
const (
	stateCreating = "creating" // the branch may not exist yet
	stateReady    = "ready"
	stateDeleting = "deleting" // the branch and directory are going
)

// record is what the state directory keeps of a workspace, in
// workspaces/NAME/workspace.json. The workspace's data is its branch in
// the store; the record holds what the branch does not: when it was
// created and last used, its lifetime, what it was created from, its
// metadata. LastUsed is written when the workspace is unmounted (and at
// Close), not on every use: after a kill -9 the last use before it may be
// older than true, which only delays an idle unmount.
type record struct {
	Name   string `json:"name"`
	Branch string `json:"branch"`
	// Store is the store URL (without credentials) whose volume holds the
	// branch: a daemon started on another store refuses the state dir.
	Store          string            `json:"store"`
	State          string            `json:"state"`
	Created        time.Time         `json:"created"`
	LastUsed       time.Time         `json:"last_used"`
	ExpiresAt      *time.Time        `json:"expires_at,omitempty"`
	DeleteOnExpiry bool              `json:"delete_on_expiry,omitempty"`
	Expired        bool              `json:"expired,omitempty"`
	Virtual        bool              `json:"virtual,omitempty"`
	Base           string            `json:"base,omitempty"`
	From           string            `json:"from,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	// Backend is the exec backend its creator chose; nil: the daemon's
	// (Config.Backend, whatever it is at each mount).
	Backend *exec.Spec `json:"backend,omitempty"`
}

const recordFile = "workspace.json"

// saveRecord writes r atomically (a temporary file renamed over the old
// one, both synced), creating the workspace's directory.
func (m *Manager) saveRecord(r record) error {
	dir := m.wsDir(r.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("workspace %s: record: %w", r.Name, err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, recordFile+".tmp-*")
	if err != nil {
		return fmt.Errorf("workspace %s: record: %w", r.Name, err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, recordFile))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("workspace %s: write record: %w", r.Name, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// loadRecords reads every record under the state directory. A directory
// without a readable record is reported in skipped (with why) and left
// alone.
func (m *Manager) loadRecords() (recs []record, skipped map[string]error, err error) {
	ents, err := os.ReadDir(filepath.Join(m.stateDir, "workspaces"))
	if err != nil {
		return nil, nil, fmt.Errorf("state dir: %w", err)
	}
	skipped = map[string]error{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.wsDir(e.Name()), recordFile))
		if err != nil {
			skipped[e.Name()] = err
			continue
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			skipped[e.Name()] = err
			continue
		}
		if r.Name != e.Name() {
			skipped[e.Name()] = fmt.Errorf("record names workspace %q", r.Name)
			continue
		}
		recs = append(recs, r)
	}
	return recs, skipped, nil
}
