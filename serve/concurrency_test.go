package serve_test

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/agentfs/agentfs/serve/api"
)

// TestConcurrentClients: 32 clients run 100 mixed operations each over 8
// workspaces (writes, reads, edits, renames, removes, commands that
// write), each client in its own directory; then every workspace's
// manifest (paths and contents, read through the API and through a
// command) equals what the clients wrote.
func TestConcurrentClients(t *testing.T) {
	d := newDaemon(t, nil)
	ctx := ctxT(t)
	const workspaces, clients, ops = 8, 32, 100
	for i := range workspaces {
		d.create(fmt.Sprintf("w%d", i))
	}
	want := make([]map[string]string, clients) // per client: path -> content
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := d.admin.Workspace(fmt.Sprintf("w%d", c%workspaces))
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			files := map[string]string{}
			dir := fmt.Sprintf("c%d", c)
			fail := func(op string, err error) { errs <- fmt.Errorf("client %d %s: %w", c, op, err) }
			for i := range ops {
				var names []string
				for n := range files {
					names = append(names, n)
				}
				sort.Strings(names)
				pick := func() string { return names[rng.IntN(len(names))] }
				switch op := rng.IntN(6); {
				case op == 0 || len(names) == 0:
					p := fmt.Sprintf("%s/sub%d/f%d.txt", dir, i%3, i)
					content := fmt.Sprintf("client %d op %d\n", c, i)
					if err := w.WriteFile(ctx, p, []byte(content)); err != nil {
						fail("write", err)
						return
					}
					files[p] = content
				case op == 1:
					p := pick()
					data, err := w.ReadFile(ctx, p)
					if err != nil || string(data) != files[p] {
						fail("read "+p, fmt.Errorf("%q, want %q: %w", data, files[p], err))
						return
					}
				case op == 2:
					p := pick()
					if _, err := w.Edit(ctx, api.Edit{Path: p, Old: "op", New: "OP"}); err != nil {
						if !strings.Contains(files[p], "op") {
							continue
						}
						fail("edit "+p, err)
						return
					}
					files[p] = strings.Replace(files[p], "op", "OP", 1)
				case op == 3:
					p := pick()
					to := fmt.Sprintf("%s/moved%d.txt", dir, i)
					if err := w.Rename(ctx, p, to); err != nil {
						fail("rename", err)
						return
					}
					files[to] = files[p]
					delete(files, p)
				case op == 4:
					p := pick()
					if err := w.Remove(ctx, p, false); err != nil {
						fail("remove", err)
						return
					}
					delete(files, p)
				default:
					p := fmt.Sprintf("%s/cmd%d.txt", dir, i)
					res, err := w.Exec(ctx, api.ExecRequest{Command: fmt.Sprintf("mkdir -p %s && printf 'cmd %d' > %s", dir, i, p)})
					if err != nil || res.ExitCode != 0 {
						fail("exec", fmt.Errorf("%+v: %w", res, err))
						return
					}
					files[p] = fmt.Sprintf("cmd %d", i)
				}
			}
			want[c] = files
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	for i := range workspaces {
		w := d.admin.Workspace(fmt.Sprintf("w%d", i))
		expect := map[string]string{}
		for c := i; c < clients; c += workspaces {
			for p, content := range want[c] {
				expect[p] = content
			}
		}
		l, err := w.List(ctx, "", true)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, e := range l.Entries {
			if e.Type != "file" {
				continue
			}
			data, err := w.ReadFile(ctx, e.Path)
			if err != nil {
				t.Fatal(err)
			}
			got[e.Path] = string(data)
		}
		if len(got) != len(expect) {
			t.Errorf("w%d: %d files, want %d", i, len(got), len(expect))
		}
		for p, content := range expect {
			if got[p] != content {
				t.Errorf("w%d %s: %q, want %q", i, p, got[p], content)
			}
		}
		// A command sees the same manifest as the API.
		res, err := w.Exec(ctx, api.ExecRequest{Command: "find . -type f | wc -l"})
		if err != nil || strings.TrimSpace(res.Stdout) != fmt.Sprint(len(expect)) {
			t.Errorf("w%d: find counts %q, want %d (%v)", i, res.Stdout, len(expect), err)
		}
	}
}
