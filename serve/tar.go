package serve

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/apierr"
)

// Tar transfers run tar(1) in the workspace through its exec backend, so
// the directory is confined like any cwd and symlinks, modes and times
// travel as tar keeps them.

// tarTimeout bounds a tar transfer.
const tarTimeout = MaxExecTimeout

// downloadTar answers GET .../tar/{path}: the directory as a tar stream.
func (s *Server) downloadTar(c *call) error {
	dir := orRoot(c.r.PathValue("path"))
	c.path = dir
	release, err := s.limits.acquire(c.ws.Name, false)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := s.deadline(c, tarTimeout)
	defer cancel()
	var stderr bytes.Buffer
	sw := &lazyHeader{w: c.w, ctype: "application/x-tar"}
	res, err := c.ws.Backend.Exec(ctx, exec.Request{
		Argv: []string{"tar", "-cf", "-", "."}, Cwd: dir, Timeout: tarTimeout,
		OutputLimit: -1, DiscardOutput: true, Stdout: sw, Stderr: &stderr,
	})
	if res == nil || execError(err) != nil {
		return err
	}
	if res.ExitCode != 0 && !sw.started {
		return apierr.New(apierr.Internal, "tar of %q exited %d: %s", dir, res.ExitCode, strings.TrimSpace(stderr.String()))
	}
	if !sw.started {
		sw.start()
	}
	return nil
}

// uploadTar answers PUT .../tar/{path}: the body, a tar stream, is
// extracted into the directory (created with its parents).
func (s *Server) uploadTar(c *call) error {
	dir := orRoot(c.r.PathValue("path"))
	c.path = dir
	release, err := s.limits.acquire(c.ws.Name, false)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := s.deadline(c, tarTimeout)
	defer cancel()
	if err := c.ws.Backend.Mkdir(ctx, dir, true); err != nil {
		return err
	}
	res, err := c.ws.Backend.Exec(ctx, exec.Request{
		Argv: []string{"tar", "-xf", "-", "--no-same-owner"}, Cwd: dir, Timeout: tarTimeout, Stdin: c.r.Body,
	})
	if res == nil || execError(err) != nil {
		return err
	}
	if res.ExitCode != 0 {
		return apierr.New(apierr.InvalidArgument, "extracting the tar into %q failed (tar exited %d): %s", dir, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	writeJSON(c.w, http.StatusOK, newExecResult(res, encUTF8).Changes)
	return nil
}

// lazyHeader writes the response header with the first bytes, so that a
// transfer that fails before any can still answer with an error.
type lazyHeader struct {
	w       http.ResponseWriter
	ctype   string
	started bool
}

func (l *lazyHeader) start() {
	l.started = true
	l.w.Header().Set("Content-Type", l.ctype)
	l.w.WriteHeader(http.StatusOK)
}

func (l *lazyHeader) Write(p []byte) (int, error) {
	if !l.started {
		l.start()
	}
	return l.w.Write(p)
}
