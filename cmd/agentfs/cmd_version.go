package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version, when set at build time with -ldflags "-X main.version=...",
// replaces the module version of the build information.
var version = ""

func init() { subcommands = append(subcommands, newVersionCmd) }

// versionString describes this build from its build information (see
// formatVersion).
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	return formatVersion(bi, ok)
}

// formatVersion describes a build as one line: the module version
// ("(devel)" for a build from a checkout, unless main.version is set), the
// VCS revision and whether the tree had uncommitted changes (vcs.revision,
// vcs.modified: go build records them in a git checkout unless
// -buildvcs=false), the Go version and the platform.
func formatVersion(bi *debug.BuildInfo, ok bool) string {
	v, rev, modified, goVersion := version, "", "", runtime.Version()
	if ok {
		if v == "" {
			v = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	vcs := "no VCS information: built outside a git checkout or with -buildvcs=false"
	if rev != "" {
		vcs = "commit " + rev
		switch modified {
		case "true":
			vcs += " with uncommitted changes"
		case "false":
			vcs += ", clean"
		}
	}
	return fmt.Sprintf("agentfs %s (%s) %s %s/%s", v, vcs, goVersion, runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the agentfs version: module version, VCS commit, Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionString())
			return err
		},
	}
}
