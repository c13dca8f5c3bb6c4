package serve

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/apierr"
)

// FuzzExecRequest feeds arbitrary bodies to the decoder and validation of
// the command routes: they never panic, and every refusal is a classified
// API error (invalid_argument or too_large), never internal.
func FuzzExecRequest(f *testing.F) {
	for _, seed := range []string{
		`{"command":"ls","timeout":30,"env":{"A":"b"},"cwd":"sub"}`,
		`{"argv":["echo","x"],"stdin":"aGk=","encoding":"base64"}`,
		`{"command":"x","argv":["y"]}`, `{"timeout":-1}`, `{"timeout":1e300,"command":"x"}`,
		`{"command":"x","encoding":"latin1"}`, `{"command":"x","stdin":"%%%","encoding":"base64"}`,
		`{"unknown":1}`, `{} {}`, ``, `[`, `{"output_limit":-5,"command":"x"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		var req execRequest
		err := decode(r, &req)
		if err == nil {
			var er exec.Request
			er, err = req.toExec()
			if err == nil {
				if (er.Command == "") == (len(er.Argv) == 0) || er.Timeout <= 0 || er.Timeout > MaxExecTimeout || er.OutputLimit < 0 {
					t.Fatalf("accepted %q as %+v", body, er)
				}
				return
			}
		}
		if c := apierr.CodeOf(err); c != apierr.InvalidArgument && c != apierr.TooLarge {
			t.Fatalf("body %q: error %v classified %s", body, err, c)
		}
	})
}

// FuzzDecode: any JSON body decodes into every request type or fails with
// invalid_argument; a body over the cap is too_large.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"path":"a","old":"x","new":"y","replace_all":true}`), uint16(0))
	f.Add([]byte(`{"pattern":"**/*.go","path":"src"}`), uint16(3))
	f.Add([]byte(`{"name":"w","lifetime":3.5,"metadata":{"k":"v"}}`), uint16(0))
	f.Add([]byte(`{"from":"s1","to":"live","path":"../x"}`), uint16(10))
	f.Fuzz(func(t *testing.T, body []byte, limit uint16) {
		for _, v := range []any{&api.Edit{}, &api.Glob{}, &api.Grep{}, &api.CreateWorkspace{}, &api.Diff{}, &api.VirtualCommit{}, &api.Mkdir{}, &api.FromTo{}, &api.CreateToken{}} {
			r := httptest.NewRequest("POST", "/", bytes.NewReader(body))
			w := httptest.NewRecorder()
			if limit > 0 {
				r.Body = http.MaxBytesReader(w, r.Body, int64(limit))
			}
			err := decode(r, v)
			if err == nil {
				continue
			}
			var ae *apierr.Error
			if !errors.As(err, &ae) || ae.Code != apierr.InvalidArgument && ae.Code != apierr.TooLarge {
				t.Fatalf("decode %q into %T: %v", body, v, err)
			}
			if ae.Code == apierr.TooLarge && (limit == 0 || len(body) <= int(limit)) {
				t.Fatalf("decode %q (limit %d): too_large", body, limit)
			}
		}
	})
}

// FuzzTreePath: a history path is accepted only when it stays inside the
// root, and comes back clean.
func FuzzTreePath(f *testing.F) {
	for _, s := range []string{"", ".", "a/b", "../x", "a/../../b", "/etc", "a//b/", "./a/./b/.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		clean, err := treePath("diff", p)
		if err != nil {
			if !errors.Is(err, exec.ErrPathEscape) {
				t.Fatalf("treePath(%q): %v", p, err)
			}
			return
		}
		if strings.HasPrefix(clean, "/") || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(clean, "/../") {
			t.Fatalf("treePath(%q) = %q", p, clean)
		}
	})
}
