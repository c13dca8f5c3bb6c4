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
// time zone and temporary directory. Nothing else: the rest of a
// controller's environment is where credentials live
// (AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, GOOGLE_APPLICATION_CREDENTIALS,
// API tokens, AGENTFS_*). LC_* variables are kept too (isLocale).
var baseVars = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR", "LANG", "LANGUAGE"}

// isLocale reports whether name is a locale category variable (LC_ALL,
// LC_CTYPE, ...).
func isLocale(name string) bool { return strings.HasPrefix(name, "LC_") }

// baseEnv returns the variables of environ (K=V strings) that a local
// command starts with unless Options.InheritEnv (baseVars and LC_*), with
// PATH set to DefaultPath when environ has none.
func baseEnv(environ []string) []string {
	var out []string
	hasPath := false
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !isLocale(name) && !slices.Contains(baseVars, name) {
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

// localEnv is the environment a local backend with opts starts every
// command from, before the request's variables.
func localEnv(opts Options) []string {
	start := os.Environ()
	if !opts.InheritEnv {
		start = baseEnv(start)
	}
	return mergeEnv(start, opts.Env)
}
