package exec

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// credentialVars are variables where store credentials and tokens live.
var credentialVars = []string{"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN",
	"GOOGLE_APPLICATION_CREDENTIALS", "GITHUB_TOKEN"}

// TestLocalEnv: a local command starts from the base environment — the
// controller's PATH, HOME, locale... but none of its credentials — plus
// Options.Env and the request's; with InheritEnv, from the controller's
// whole environment, credentials included (but agentfs's own secrets:
// TestLocalEnvSecrets).
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

// TestLocalEnvSecrets: agentfs's own secrets (the volume's key, the admin
// token...) in the controller's environment reach no local command, even
// with InheritEnv; set in Options.Env or the request's env they do.
func TestLocalEnvSecrets(t *testing.T) {
	for _, v := range secretVars {
		t.Setenv(v, "daemon-"+v)
	}
	for _, inherit := range []bool{false, true} {
		b, err := NewLocal(t.TempDir(), Options{InheritEnv: inherit, Env: map[string]string{"AGENTFS_TOKEN": "opt"}})
		if err != nil {
			t.Fatal(err)
		}
		res := mustExec(t, b, Request{Argv: []string{"env"}, Env: map[string]string{"AGENTFS_KEY": "asked"}})
		_ = b.Close()
		env := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
		for _, want := range []string{"AGENTFS_KEY=asked", "AGENTFS_TOKEN=opt"} {
			if !slices.Contains(env, want) {
				t.Errorf("inherit %v: %s missing from %q", inherit, want, env)
			}
		}
		for _, v := range []string{"AGENTFS_PASSPHRASE", "AGENTFS_NEW_KEY", "AGENTFS_NEW_PASSPHRASE"} {
			if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, v+"=") }) {
				t.Errorf("inherit %v: the daemon's %s reached the command: %q", inherit, v, env)
			}
		}
	}
	b, err := NewLocal(t.TempDir(), Options{InheritEnv: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	res := mustExec(t, b, Request{Command: "printenv AGENTFS_KEY || echo unset"})
	if got := string(res.Stdout); got != "unset\n" {
		t.Errorf("AGENTFS_KEY of the daemon's environment with InheritEnv: %q", got)
	}
}

func TestBaseEnv(t *testing.T) {
	got := baseEnv([]string{"HOME=/h", "AWS_SECRET_ACCESS_KEY=s", "LC_ALL=C", "LANG=en", "XLC_X=1", "TMPDIR=/t",
		"SSL_CERT_FILE=/c.pem", "HTTPS_PROXY=http://u:p@proxy:3128", "SSL_CERT_DIR=/certs", "http_proxy=http://u:p@proxy",
		"REQUESTS_CA_BUNDLE=/r.pem", "NODE_EXTRA_CA_CERTS=/n.pem", "CURL_CA_BUNDLE=/cu.pem", "XDG_DATA_HOME=/d", "XDG_CACHE_HOME=/ch",
		"AGENTFS_KEY=k", "NO_PROXY=x"})
	if want := []string{"HOME=/h", "LC_ALL=C", "LANG=en", "TMPDIR=/t", "SSL_CERT_FILE=/c.pem", "SSL_CERT_DIR=/certs",
		"REQUESTS_CA_BUNDLE=/r.pem", "NODE_EXTRA_CA_CERTS=/n.pem", "CURL_CA_BUNDLE=/cu.pem", "XDG_DATA_HOME=/d", "XDG_CACHE_HOME=/ch",
		"PATH=" + DefaultPath}; !slices.Equal(got, want) {
		t.Errorf("baseEnv = %q, want %q", got, want)
	}
	if got := baseEnv([]string{"PATH=/p"}); !slices.Equal(got, []string{"PATH=/p"}) {
		t.Errorf("baseEnv kept no PATH of its own: %q", got)
	}
}
