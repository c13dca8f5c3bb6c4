package exec

import (
	"os"
	"slices"
	"strings"
)

// DefaultPath is the PATH of a local command's base environment when the
// controller has none (Docker's default PATH).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// baseVars are the variables of the controller's environment that a local
// command starts with unless Options.InheritEnv: what a program needs to
// find programs, its user's home and files, its shell, terminal, locale,
// time zone and temporary directory, and the CA certificates TLS clients
// trust (paths: without them pip, npm, git and curl fail behind a
// corporate CA). Nothing else: the rest of a controller's environment is
// where credentials live (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// GOOGLE_APPLICATION_CREDENTIALS, API tokens, AGENTFS_*, and proxy URLs,
// which may carry user:password@). LC_* and XDG_* variables are kept too
// (isBasePrefix).
var baseVars = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG", "LANGUAGE",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"}

// isBasePrefix reports whether name is a locale category variable (LC_ALL,
// LC_CTYPE, ...) or an XDG base directory variable (XDG_DATA_HOME, ...,
// where the agentfs CLI finds its default store).
func isBasePrefix(name string) bool {
	return strings.HasPrefix(name, "LC_") || strings.HasPrefix(name, "XDG_")
}

// secretVars are agentfs's own secrets: the volume's key or passphrase
// (internal/volkey's EnvKey, EnvPassphrase), the new ones of `agentfs key
// rotate` (EnvNewKey, EnvNewPassphrase) and the admin token of `agentfs
// serve`. A local command never gets them from the controller's
// environment, even with Options.InheritEnv: an agent's command must not
// read the key of the volume it runs on. Options.Env or Request.Env may
// still set them: that is their caller's decision.
var secretVars = []string{"AGENTFS_KEY", "AGENTFS_PASSPHRASE", "AGENTFS_NEW_KEY", "AGENTFS_NEW_PASSPHRASE", "AGENTFS_TOKEN"}

// baseEnv returns the variables of environ (K=V strings) that a local
// command starts with unless Options.InheritEnv (baseVars, LC_* and XDG_*),
// with PATH set to DefaultPath when environ has none.
func baseEnv(environ []string) []string {
	var out []string
	hasPath := false
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !isBasePrefix(name) && !slices.Contains(baseVars, name) {
			continue
		}
		hasPath = hasPath || name == "PATH"
		out = append(out, kv)
	}
	if !hasPath {
		out = append(out, "PATH="+DefaultPath)
	}
	return out
}

// withoutSecrets returns environ without secretVars.
func withoutSecrets(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(secretVars, name)
	})
}

// localEnv is the environment a local backend with opts starts every
// command from, before the request's variables: the base environment, or
// with InheritEnv the controller's whole one, never with agentfs's
// secrets, plus opts.Env.
func localEnv(opts Options) []string {
	start := os.Environ()
	if !opts.InheritEnv {
		start = baseEnv(start)
	}
	return mergeEnv(withoutSecrets(start), opts.Env)
}
