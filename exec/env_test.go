package exec

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// credentialVars are variables where store credentials and tokens live.
var credentialVars = []string{"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN",
	"GOOGLE_APPLICATION_CREDENTIALS", "AGENTFS_KEY", "AGENTFS_TOKEN"}

// TestLocalEnv: a local command starts from the base environment — the
// controller's PATH, HOME, locale... but none of its credentials — plus
// Options.Env and the request's; with InheritEnv, from the controller's
// whole environment, credentials included.
func TestLocalEnv(t *testing.T) {
	for _, v := range credentialVars {
		t.Setenv(v, "secret-"+v)
	}
	t.Setenv("LC_TIME", "C.UTF-8")
	t.Setenv("OTHER_VAR", "other")
	for _, inherit := range []bool{false, true} {
		b, err := NewLocal(t.TempDir(), Options{InheritEnv: inherit, Env: map[string]string{"OPT": "o"}})
		if err != nil {
			t.Fatal(err)
		}
		res := mustExec(t, b, Request{Argv: []string{"env"}, Env: map[string]string{"REQ": "r", "AWS_PROFILE": "asked"}})
		_ = b.Close()
		env := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
		for _, want := range []string{"HOME=" + os.Getenv("HOME"), "LC_TIME=C.UTF-8", "OPT=o", "REQ=r", "AWS_PROFILE=asked"} {
			if !slices.Contains(env, want) {
				t.Errorf("inherit %v: %s missing from %q", inherit, want, env)
			}
		}
		if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=/") }) {
			t.Errorf("inherit %v: no PATH in %q", inherit, env)
		}
		held := []string{"OTHER_VAR=other"}
		for _, v := range credentialVars {
			held = append(held, v+"=secret-"+v)
		}
		for _, kv := range held {
			if got := slices.Contains(env, kv); got != inherit {
				t.Errorf("inherit %v: %s in the command's environment: %v", inherit, kv, got)
			}
		}
	}
}

func TestBaseEnv(t *testing.T) {
	got := baseEnv([]string{"HOME=/h", "AWS_SECRET_ACCESS_KEY=s", "LC_ALL=C", "LANG=en", "XLC_X=1", "TMPDIR=/t"})
	if want := []string{"HOME=/h", "LC_ALL=C", "LANG=en", "TMPDIR=/t", "PATH=" + DefaultPath}; !slices.Equal(got, want) {
		t.Errorf("baseEnv = %q, want %q", got, want)
	}
	if got := baseEnv([]string{"PATH=/p"}); !slices.Equal(got, []string{"PATH=/p"}) {
		t.Errorf("baseEnv kept no PATH of its own: %q", got)
	}
}
