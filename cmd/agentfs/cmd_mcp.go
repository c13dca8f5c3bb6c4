package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/serve/mcp"
	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newMCPCmd) }

func newMCPCmd() *cobra.Command {
	var branch, cacheDir string
	var deny bool
	c := &cobra.Command{
		Use:   "mcp [flags] MOUNTPOINT|URL",
		Short: "Serve one workspace's files, commands and snapshots as MCP tools over stdio",
		Long: `Serve one workspace to an MCP client (a desktop agent, an IDE) over stdio:
JSON-RPC on standard input and output, logs on standard error.

The tools: read_file (numbered lines, offset/limit), write_file, edit_file
(old_string/new_string/replace_all), list_directory, glob, grep, execute (a
shell command, timeout in seconds, default 120), background_start,
background_list, background_output, background_kill, snapshot_save,
snapshot_list, snapshot_restore, diff, and for a virtual workspace commit and
discard. Every path is relative to the workspace root; paths that leave it
are refused (path_escape). A failed call is a tool error whose text starts
with the error code of the HTTP API (not_found, not_unique, timeout, ...).

MOUNTPOINT is a mounted agentfs workspace (agentfs mount -d ...): commands
run there, what they write is synced to the store before execute returns,
and execute lists the paths they changed. Any other directory works too,
without snapshots and change lists.

URL is a store URL (file:///path, s3://bucket/prefix, gs://bucket/prefix):
agentfs mcp mounts its branch (--branch) on a temporary mount point, served
by a separate ` + "`agentfs mount -d`" + ` process as ` + "`agentfs run`" + ` does, and when the
client disconnects (or on SIGINT/SIGTERM) kills the background jobs, syncs
and unmounts it.

Commands run on this host as the current user, with agentfs mcp's whole
environment (the one the client's configuration gives it) plus a call's env,
but for agentfs's own secrets (AGENTFS_KEY, AGENTFS_PASSPHRASE,
AGENTFS_NEW_KEY, AGENTFS_NEW_PASSPHRASE, AGENTFS_TOKEN): the volume's key
given to agentfs mcp mounts the URL and reaches no command, and agentfs mcp
makes itself undumpable so that they cannot read it in its /proc/PID/environ
either (unless they run as root). --deny-dangerous refuses
known-dangerous commands (rm -rf /, curl | sh, ...): a safety net, not a
sandbox.

A desktop MCP client's configuration (claude_desktop_config.json, .mcp.json,
...):

  {
    "mcpServers": {
      "workspace": {
        "command": "agentfs",
        "args": ["mcp", "/home/me/ws"]
      }
    }
  }

or, to mount a store for the session, "args": ["mcp", "file:///srv/agentfs/vol"].

The ` + "`agentfs serve`" + ` daemon serves the same tools over streamable HTTP at /mcp
(a workspace token selects its workspace; the admin token names one as
/mcp/NAME), for clients that take a URL:

  { "mcpServers": { "workspace": { "type": "http", "url": "http://127.0.0.1:7070/mcp",
      "headers": { "Authorization": "Bearer TOKEN" } } } }`,
		Example: `  agentfs mount -d file:///srv/agentfs/vol ~/ws && agentfs mcp ~/ws
  agentfs mcp --branch attempt-2 s3://bucket/ws
  agentfs mcp --deny-dangerous ./project`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !isStoreURL(args[0]) {
				for _, name := range []string{"branch", "cache-dir"} {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("--%s applies to a store URL, not to the directory %s", name, args[0])
					}
				}
			}
			return runMCP(cmd, args[0], branch, cacheDir, deny)
		},
	}
	c.Flags().StringVar(&branch, "branch", snapshot.DefaultBranch, "with a URL: the branch to mount (an existing one: agentfs fork makes branches)")
	c.Flags().StringVar(&cacheDir, "cache-dir", "", "with a URL: the mount's local cache `DIR` (default: as agentfs mount)")
	c.Flags().BoolVar(&deny, "deny-dangerous", false, "refuse known-dangerous commands (rm -rf /, curl | sh, ...)")
	return c
}

func runMCP(cmd *cobra.Command, arg, branch, cacheDir string, deny bool) (err error) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	// The environment may hold the volume's key (AGENTFS_KEY, ...), which
	// the commands must not read in /proc/PID/environ. Nothing needs this
	// process's /proc: its mount server gets the key through
	// internal/mountproc's secrets pipe, from Go's copy of the environment.
	if err := undumpable(); err != nil {
		return err
	}
	stderr := cmd.ErrOrStderr()
	dir := arg
	if isStoreURL(arg) {
		m, err := mountTemp(ctx, arg, branch, cacheDir, stderr)
		if err != nil {
			return err
		}
		dir = m.mnt
		defer func() {
			if cerr := m.close(ctx, stderr, "agentfs mcp"); cerr != nil && err == nil {
				err = &exitError{1}
			}
		}()
	}
	b, cl, err := mcpBackend(ctx, dir, deny)
	if err != nil {
		return err
	}
	// Closing the backend kills the background jobs before the unmount.
	defer func() {
		if cerr := b.Close(); cerr != nil {
			_, _ = fmt.Fprintln(stderr, "agentfs mcp:", cerr)
		}
	}()
	s := mcp.NewServer(mcp.Fixed{Backend: b, Control: cl}, mcp.Options{Version: versionString(),
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	err = s.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{cmd.OutOrStdout()}})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil // the client disconnected, or SIGINT/SIGTERM
	}
	return fmt.Errorf("serving MCP on stdio: %w", err)
}

// mcpBackend is the local backend of the workspace at dir, with the mount's
// seams and control client when dir is on an agentfs mount (nil client
// otherwise).
func mcpBackend(ctx context.Context, dir string, deny bool) (*exec.Backend, *control.Client, error) {
	// Commands get this process's whole environment: the one its MCP
	// client chose to give it (the "env" of its server entry), as the
	// client's other stdio servers' tools do; the local backend leaves out
	// agentfs's own secrets (the volume's key).
	opts := exec.Options{ChangeTracker: exec.NoChanges{}, InheritEnv: true}
	if deny {
		opts.Policy = exec.DenyDangerous()
	}
	cl, err := control.Find(ctx, dir)
	switch {
	case errors.Is(err, control.ErrNotMount):
		cl = nil
	case err != nil:
		return nil, nil, err
	default:
		s, t, err := execMountSeams(ctx, dir)
		if err != nil {
			return nil, nil, err
		}
		opts.Syncer, opts.ChangeTracker = s, t
	}
	b, err := exec.NewLocal(dir, opts)
	if err != nil {
		return nil, nil, err
	}
	return b, cl, nil
}

// nopWriteCloser is standard output for the MCP transport, which closes its
// writer when the session ends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
