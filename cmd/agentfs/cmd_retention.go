package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newRetentionCmd) }

// retentionHelp explains the rules, for `retention` and `gc`.
const retentionHelp = `A volume keeps every snapshot and each branch's newest commit, always. Of
the other commits, the volume's retention policy keeps:

  --keep-last N      the newest N of each branch
  --keep-within D    every commit written within D
  --hourly D         the newest of each hour (UTC) among those within D
  --daily D          the newest of each day (UTC) among those within D
  --weekly D         the newest of each week (from Monday, UTC) within D

A commit is kept when any rule keeps it. A volume that has set no policy
uses the default: every commit of the last hour, the newest of each hour
for a day, the newest of each day for a week (--keep-within 1h --hourly 1d
--daily 7d). Anything that must outlive that is worth a snapshot
(agentfs snapshot save). Ages are those of the commit objects in the store.`

// retentionFlags are the rules of a policy given on the command line.
type retentionFlags struct {
	p       snapshot.Retention
	keepAll bool
}

var retentionFlagNames = []string{"keep-last", "keep-within", "hourly", "daily", "weekly", "keep-all"}

func (r *retentionFlags) add(f *pflag.FlagSet) {
	f.IntVar(&r.p.KeepLast, "keep-last", 0, "keep the newest `N` commits of each branch")
	f.Var(ageFlag{&r.p.KeepWithin}, "keep-within", "keep every commit younger than this (e.g. 1h, 7d, 2w)")
	f.Var(ageFlag{&r.p.Hourly}, "hourly", "keep the newest commit of each hour within this (e.g. 1d)")
	f.Var(ageFlag{&r.p.Daily}, "daily", "keep the newest commit of each day within this (e.g. 7d)")
	f.Var(ageFlag{&r.p.Weekly}, "weekly", "keep the newest commit of each week within this (e.g. 8w)")
	f.BoolVar(&r.keepAll, "keep-all", false, "keep every commit")
}

// policy returns the policy the flags give, or nil when none was given.
func (r *retentionFlags) policy(f *pflag.FlagSet) (*snapshot.Retention, error) {
	changed := slices.ContainsFunc(retentionFlagNames[:5], func(n string) bool { return f.Changed(n) })
	switch {
	case r.keepAll && changed:
		return nil, fmt.Errorf("--keep-all keeps every commit: give it alone, without other rules")
	case r.keepAll:
		return &snapshot.Retention{}, nil
	case changed:
		if r.p.KeepLast < 0 {
			return nil, fmt.Errorf("--keep-last %d: must not be negative", r.p.KeepLast)
		}
		return &r.p, nil
	}
	return nil, nil
}

func newRetentionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "retention",
		Short: "Show or set which old commits a volume keeps",
		Long: retentionHelp + `

A read-write mount applies the policy in the background: two minutes after it
starts and about hourly then, when no gc applied it in the last hour and the
policy would remove commits (or no gc ran for a day), it runs a gc (see agentfs
gc --help), which removes the commits the policy does not keep and the data
only they used.
agentfs gc applies it on demand. agentfs status shows the policy and the
mount's last run.`,
		Example: `  agentfs retention show ./workspace
  agentfs retention set s3://bucket/ws --keep-within 1h --hourly 2d --daily 30d
  agentfs retention set ./workspace --keep-all
  agentfs retention set ./workspace --default`,
	}
	c.AddCommand(newRetentionShowCmd(), newRetentionSetCmd())
	return c
}

func newRetentionShowCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "show URL|MOUNTPOINT",
		Short: "Show a volume's retention policy",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			ret, err := t.c.Retention(cmd.Context())
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), ret)
			}
			return writeRetention(cmd.OutOrStdout(), ret, time.Now())
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	return c
}

func newRetentionSetCmd() *cobra.Command {
	var (
		rf    retentionFlags
		reset bool
	)
	c := &cobra.Command{
		Use:   "set URL|MOUNTPOINT (RULES... | --keep-all | --default)",
		Short: "Set a volume's retention policy",
		Long: `Set the retention policy of a volume: the rules given replace the whole
policy (a rule not given is off). --keep-all keeps every commit; --default
removes the volume's own policy, so that the default applies.

` + retentionHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := rf.policy(cmd.Flags())
			if err != nil {
				return err
			}
			if (p == nil) == !reset {
				return fmt.Errorf("give the rules of the new policy (--keep-within, --hourly, --daily, --weekly, --keep-last), --keep-all, or --default")
			}
			req := control.RetentionRequest{Reset: reset}
			if p != nil {
				req.Policy = *p
			}
			t, err := openTarget(cmd.Context(), args[0], volumeKeys(cmd))
			if err != nil {
				return err
			}
			defer t.close()
			ret, err := t.c.SetRetention(cmd.Context(), req)
			if err != nil {
				return err
			}
			return writeRetention(cmd.OutOrStdout(), ret, time.Now())
		},
	}
	rf.add(c.Flags())
	c.Flags().BoolVar(&reset, "default", false, "remove the volume's own policy: the default applies")
	return c
}

// retentionLine describes a policy in one line: its rules, and whether it
// is the default.
func retentionLine(ret control.Retention) string {
	s := ret.Description
	if !ret.Stored {
		s += " (the default)"
	}
	return s
}

// autoGCLine describes a mount's last background gc in one line.
func autoGCLine(run *control.AutoGCRun, now time.Time) string {
	if run == nil {
		return ""
	}
	if run.Time.IsZero() {
		return "first background gc in " + snapshot.FormatAge(run.Next.Sub(now).Round(time.Second))
	}
	s := "last background gc " + snapshot.FormatAge(now.Sub(run.Time).Round(time.Second)) + " ago: "
	if run.Error != "" {
		s += "failed: " + strings.TrimSpace(run.Error)
	} else {
		s += fmt.Sprintf("%d commits and %d packs removed, %s freed", run.CommitsPruned, run.PacksSwept, fmtSize(run.BytesFreed))
	}
	return s + "; next in " + snapshot.FormatAge(run.Next.Sub(now).Round(time.Minute))
}

func writeRetention(w io.Writer, ret control.Retention, now time.Time) error {
	ew := &errWriter{w: w}
	ew.printf("policy: %s\n", retentionLine(ret))
	ew.printf("rules:  %s\n", retentionRules(ret.Policy))
	if l := autoGCLine(ret.LastGC, now); l != "" {
		ew.printf("mount:  %s\n", l)
	}
	return ew.Err()
}

// retentionRules writes p as the flags that set it.
func retentionRules(p snapshot.Retention) string {
	if p.KeepsAll() {
		return "--keep-all"
	}
	var parts []string
	if p.KeepLast > 0 {
		parts = append(parts, fmt.Sprintf("--keep-last %d", p.KeepLast))
	}
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"keep-within", p.KeepWithin}, {"hourly", p.Hourly}, {"daily", p.Daily}, {"weekly", p.Weekly}} {
		if r.d > 0 {
			parts = append(parts, "--"+r.name+" "+snapshot.FormatAge(r.d))
		}
	}
	return strings.Join(parts, " ")
}
