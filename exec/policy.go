package exec

import (
	"regexp"
	"strings"
)

// Policy decides whether a command may run. Check is called before every
// command (Exec and Start), from the caller's goroutine, and must be safe
// for concurrent use; it returns nil to allow the command, or an error that
// satisfies errors.Is(err, ErrRefused) (normally a *PolicyError) to refuse
// it, in which case nothing is started.
//
// A policy is defence in depth against an agent's mistakes, not a sandbox:
// it reads the command text, and a command can always hide what it does
// (eval, base64, a script file, an interpreter). Isolation comes from the
// docker backend's container, its user and its limits.
type Policy interface {
	Check(req *Request) error
}

// Rule is one pattern of a RulePolicy.
type Rule struct {
	// Name identifies the rule in a PolicyError, e.g. "rm-root".
	Name string
	// Pattern is matched against the command text: Request.Command as
	// given, or Argv quoted and joined with spaces, with runs of
	// whitespace collapsed to one space. Nil when Match is set.
	Pattern *regexp.Regexp
	// Match, when set, is used instead of Pattern, for what a regular
	// expression cannot say.
	Match func(text string) bool
	// Reason explains the refusal to the agent.
	Reason string
}

// RulePolicy refuses a command when any of its rules matches.
type RulePolicy struct {
	Rules []Rule
}

// Check implements Policy: it returns a *PolicyError naming the first rule
// that matches req, or nil.
func (p *RulePolicy) Check(req *Request) error {
	text := strings.Join(strings.Fields(req.display()), " ")
	for _, r := range p.Rules {
		if r.Match != nil && r.Match(text) || r.Pattern != nil && r.Pattern.MatchString(text) {
			return &PolicyError{Rule: r.Name, Command: req.display(), Reason: r.Reason}
		}
	}
	return nil
}

// Fragments shared by the built-in rules.
const (
	// start of a command: the line's start or a separator.
	cmdStart = `(?:^|[;&|(\x60]|\$\(|\bsudo\s+|\bdoas\s+|\bexec\s+|\bxargs\s+(?:-\S+\s+)*)\s*`
	// the root, home or everything-in-root as an rm target.
	rootTarget = `["']?(?:/|/\*|/\.\*|~/?|~/\*|\$HOME/?|\$\{HOME\}/?|\$HOME/\*)["']?(?:\s|$|[;&|)])`
)

// DenyDangerous returns a Policy that refuses well-known destructive or
// remote-code commands: recursive rm of /, ~ or $HOME (and
// --no-preserve-root), a download piped into a shell or interpreter, fork
// bombs, mkfs, dd or redirection onto a block device, recursive chmod/chown
// of /, and shutdown/reboot/halt/poweroff. It is a heuristic over the command
// text (see Policy): it catches an agent's slip, not an adversary.
func DenyDangerous() *RulePolicy {
	return &RulePolicy{Rules: []Rule{
		{
			Name:    "rm-root",
			Pattern: regexp.MustCompile(cmdStart + `rm\s+(?:-\S+\s+|--\S+\s+)*(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\s+(?:-\S+\s+|--\S+\s+)*` + rootTarget),
			Reason:  "recursive removal of the root or home directory",
		},
		{
			Name:    "rm-no-preserve-root",
			Pattern: regexp.MustCompile(`\brm\b[^;&|]*--no-preserve-root`),
			Reason:  "rm --no-preserve-root",
		},
		{
			Name:    "pipe-to-shell",
			Pattern: regexp.MustCompile(`\b(?:curl|wget|fetch)\b[^;&]*\|\s*(?:sudo\s+)?(?:\S*/)?(?:sh|bash|zsh|dash|ksh|fish|python[0-9.]*|perl|ruby|node)\b`),
			Reason:  "running a downloaded script without looking at it",
		},
		{
			Name:   "fork-bomb",
			Match:  isForkBomb,
			Reason: "fork bomb",
		},
		{
			Name:    "mkfs",
			Pattern: regexp.MustCompile(cmdStart + `(?:\S*/)?(?:mkfs(?:\.[a-z0-9]+)?|mke2fs|mkswap|wipefs)\b`),
			Reason:  "formatting a filesystem",
		},
		{
			Name:    "write-block-device",
			Pattern: regexp.MustCompile(`(?:\bdd\b[^;&|]*\bof=|>\s*)/dev/(?:sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme[0-9]|mmcblk[0-9]|disk[0-9]|mapper/)`),
			Reason:  "writing onto a block device",
		},
		{
			Name:    "chmod-chown-root",
			Pattern: regexp.MustCompile(cmdStart + `(?:chmod|chown|chgrp)\s+(?:-\S+\s+)*(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)\s+(?:\S+\s+)?` + rootTarget),
			Reason:  "recursive permission change of the root directory",
		},
		{
			Name:    "power",
			Pattern: regexp.MustCompile(cmdStart + `(?:shutdown|reboot|halt|poweroff|init\s+[06])\b`),
			Reason:  "shutting the machine down",
		},
	}}
}

// funcDef finds shell function definitions: NAME() { BODY }.
var funcDef = regexp.MustCompile(`(?:^|[;&|\s(])(?:function\s+)?([A-Za-z_:.][A-Za-z0-9_:.]*)\s*\(\s*\)\s*\{([^}]*)\}`)

// isForkBomb reports whether text defines a function that pipes itself
// into itself in the background, as :(){ :|:& };: does.
func isForkBomb(text string) bool {
	for _, m := range funcDef.FindAllStringSubmatch(text, -1) {
		name := regexp.QuoteMeta(m[1])
		self := regexp.MustCompile(`(?:^|[^A-Za-z0-9_:.])` + name + `\s*\|\s*` + name + `\s*&`)
		if self.MatchString(m[2]) {
			return true
		}
	}
	return false
}
