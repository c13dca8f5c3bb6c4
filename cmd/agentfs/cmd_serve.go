package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve"
	"github.com/agentfs/agentfs/serve/workspace"
)

func init() { subcommands = append(subcommands, newServeCmd) }

// serveFlags are the flags of agentfs serve.
type serveFlags struct {
	listen, store, stateDir, tokenFile string
	tlsCert, tlsKey                    string
	insecure                           bool
	idleTimeout                        time.Duration
	maxMounted, maxCommands, maxJobs   int
	requestTimeout                     time.Duration
	logLevel                           string
	inheritEnv                         bool
	backendFlags
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve many workspaces over an authenticated HTTP API",
		Long: `Run the agentfs daemon: it owns many workspaces and serves them over a JSON
HTTP API under /v1 (described by the OpenAPI document at /v1/openapi.json):
create, fork, list and delete workspaces; run commands (exec, streamed, or as
background jobs); read, write, edit, list, glob and grep files.

A workspace is a branch of the one volume in --store (default: the embedded
default store that 'agentfs mount' uses without a URL), so forks share data.
It is mounted on first use by a mount server process of its own, under
--state-dir, and synced and unmounted after --idle-timeout without use; the
next request mounts it again. --max-mounted caps the mounted workspaces (the
least recently used goes first). The daemon's records, tokens and mounts live
in --state-dir. An encrypted --store opens with --key-file, AGENTFS_KEY or
AGENTFS_PASSPHRASE; the daemon reads AGENTFS_TOKEN, AGENTFS_KEY and
AGENTFS_PASSPHRASE at start and removes them from its environment, so the
commands it runs do not inherit them; the daemon is not dumpable, so the
user's other processes cannot read them from its /proc/PID/environ or
memory either (a command run as root still can). Its mount servers get the
key through a pipe, never in their environment.

Every request but GET /healthz needs "Authorization: Bearer TOKEN": the admin
token, from --token-file or AGENTFS_TOKEN, or else generated on first start
and kept in STATE_DIR/admin-token (mode 0600); or a workspace token minted
with POST /v1/tokens. The daemon refuses a --listen address that is not
loopback unless it has a token given to it and TLS (--tls-cert, --tls-key),
or --insecure.

Commands run with the workspace's backend: the one given at its creation
("backend": {"type": "docker", "image": "..."}), or else --backend. local
runs them on this host as the daemon's user, with no isolation from the
host or from other workspaces, in a base environment: the daemon's PATH,
HOME, USER, LOGNAME, SHELL, TERM, TZ, TMPDIR, LANG, LANGUAGE, LC_*, XDG_* and
the CA certificate paths (SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE,
NODE_EXTRA_CA_CERTS, CURL_CA_BUNDLE), plus the request's "env"; none of its
other variables, where store credentials (AWS_SECRET_ACCESS_KEY,
GOOGLE_APPLICATION_CREDENTIALS, ...) and proxy URLs (HTTP_PROXY, ...) live,
unless --inherit-env: give a proxy in the request's "env". Never AGENTFS_KEY,
AGENTFS_PASSPHRASE, AGENTFS_NEW_*, AGENTFS_TOKEN, unless the request's "env"
sets them. docker runs them in one container per
mounted workspace (started at mount, removed at unmount), of --image (never
pulled), with the workspace at /workspace, as --user (default: the owner of
the workspace's root, which is the daemon's user for an empty workspace; as
root, give --user or "0:0"), with no network unless --network, the limits
--memory, --cpus and --pids, and no-new-privileges. These docker options
are also the defaults of the docker workspaces that leave them out, even
with --backend local. Only the admin token chooses backends: at creation,
or for one command ("backend" in an exec or job request); a workspace token
that asks is refused (403).

SIGTERM or SIGINT: the daemon stops accepting requests, kills running
commands and jobs, syncs and unmounts every workspace (removing their
containers), and exits 0. After a kill -9, the next start on the same
--state-dir adopts the mount servers still running, cleans up stale
mounts, kills the commands left running and removes the containers left.`,
		Example: `  agentfs serve
  TOKEN=$(cat ~/.local/state/agentfs/serve/admin-token)
  curl -H "Authorization: Bearer $TOKEN" -d '{"name":"demo"}' http://127.0.0.1:7070/v1/workspaces

  agentfs serve --backend docker --image python:3.12-slim --user 1000:1000 --memory 2g
  AGENTFS_TOKEN=secret agentfs serve --store s3://bucket/agents?region=eu-west-1 --max-mounted 50
  agentfs serve --listen 0.0.0.0:7443 --token-file /etc/agentfs/token --tls-cert cert.pem --tls-key key.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), cmd, f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:7070", "address to listen on (HOST:PORT)")
	fl.StringVar(&f.store, "store", "", "store URL of the workspaces' volume (default: the embedded default store)")
	fl.StringVar(&f.stateDir, "state-dir", "", "the daemon's state: records, tokens, mount points, caches (default $XDG_STATE_HOME/agentfs/serve or ~/.local/state/agentfs/serve)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the admin token (default: AGENTFS_TOKEN, else generated into STATE_DIR/admin-token)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM) ...")
	fl.StringVar(&f.tlsKey, "tls-key", "", "... and this key (PEM)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow a non-loopback --listen without a given token and TLS")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", workspace.DefaultIdleTimeout, "sync and unmount a workspace unused for this long")
	fl.IntVar(&f.maxMounted, "max-mounted", 0, "most workspaces mounted at once; the least recently used is unmounted first (0: no cap)")
	fl.IntVar(&f.maxCommands, "max-commands", serve.DefaultMaxCommands, "most commands running at once in one workspace (exec and jobs)")
	fl.IntVar(&f.maxJobs, "max-jobs", serve.DefaultMaxJobs, "most background jobs running at once in the daemon")
	fl.DurationVar(&f.requestTimeout, "request-timeout", serve.DefaultRequestTimeout, "deadline of a request (a command's is its timeout plus this)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
	fl.BoolVar(&f.inheritEnv, "inherit-env", false, "start local commands from the daemon's whole environment, store credentials and proxies included, agentfs's own secrets not (default: PATH, HOME, USER, LOGNAME, SHELL, TERM, TZ, TMPDIR, LANG, LANGUAGE, LC_*, XDG_* and CA certificate paths only)")
	addBackendFlags(c, &f.backendFlags, "the workspaces'")
	return c
}

func runServe(ctx context.Context, cmd *cobra.Command, f serveFlags) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: %w", f.logLevel, err)
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	if err := undumpable(); err != nil {
		return err
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	backend, err := f.spec(cmd)
	if err != nil {
		return err
	}
	if backend.Docker() && backend.Image == "" {
		return usageErrorf(cmd, "--backend docker needs --image (the default image of the docker workspaces)")
	}
	stateDir := f.stateDir
	if stateDir == "" {
		var err error
		if stateDir, err = workspace.DefaultStateDir(); err != nil {
			return err
		}
	}
	token, given, err := adminToken(f.tokenFile, stateDir)
	if err != nil {
		return err
	}
	if err := serve.CheckListen(f.listen, given, f.tlsCert != "", f.insecure); err != nil {
		return err
	}
	var tlsConfig *tls.Config
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return fmt.Errorf("--tls-cert %s --tls-key %s: %w", f.tlsCert, f.tlsKey, err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	keys, err := daemonKeys(cmd)
	if err != nil {
		return err
	}
	var srvRef atomic.Pointer[serve.Server]
	mgr, err := workspace.Open(ctx, workspace.Config{
		StoreURL: f.store, Keys: keys, StateDir: stateDir, IdleTimeout: f.idleTimeout, MaxMounted: f.maxMounted, Logger: log, Backend: backend,
		Exec: exec.Options{InheritEnv: f.inheritEnv},
		OnExpire: func(name string) {
			if s := srvRef.Load(); s != nil {
				s.OnExpire(name)
			}
		},
	})
	if err != nil {
		return err
	}
	closeMgr := func() error {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		return mgr.Close(cctx)
	}
	srv, err := serve.New(serve.Options{
		Manager: mgr, AdminToken: token, StateDir: stateDir, RequestTimeout: f.requestTimeout,
		MaxCommands: f.maxCommands, MaxJobs: f.maxJobs, Logger: log, Version: versionString(),
	})
	if err != nil {
		return errors.Join(err, closeMgr())
	}
	srvRef.Store(srv)
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return errors.Join(fmt.Errorf("listen on %s: %w", f.listen, err), closeMgr())
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	log.Info("agentfs serve: listening", "url", scheme+"://"+ln.Addr().String(), "state_dir", stateDir)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln, tlsConfig) }()
	select {
	case err = <-served:
		err = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		log.Info("agentfs serve: stopping: killing commands and jobs, syncing and unmounting every workspace")
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err = srv.Shutdown(sctx)
		cancel()
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	}
	if cerr := closeMgr(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err == nil {
		log.Info("agentfs serve: stopped")
	}
	return err
}

// adminToken returns the admin token and whether it was given (a file or
// AGENTFS_TOKEN) rather than generated into STATE_DIR/admin-token.
func adminToken(file, stateDir string) (token string, given bool, err error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", false, fmt.Errorf("--token-file: %w", err)
		}
		if token = strings.TrimSpace(string(data)); token == "" {
			return "", false, fmt.Errorf("--token-file %s is empty", file)
		}
		return token, true, nil
	}
	if token = strings.TrimSpace(os.Getenv("AGENTFS_TOKEN")); token != "" {
		// Commands of the local backend start from the daemon's
		// environment: they must not inherit the admin token.
		if err := os.Unsetenv("AGENTFS_TOKEN"); err != nil {
			return "", false, fmt.Errorf("AGENTFS_TOKEN: %w", err)
		}
		return token, true, nil
	}
	path := filepath.Join(stateDir, "admin-token")
	data, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(data)) != "" {
		return strings.TrimSpace(string(data)), false, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("admin token: %w", err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", false, err
	}
	token = hex.EncodeToString(buf)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", false, fmt.Errorf("state dir: %w", err)
	}
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("admin token: %w", err)
	}
	return token, false, nil
}
