package mountproc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/agentfs/agentfs/internal/volkey"
)

// A mount server started by Start gets its secrets — the volume's key or
// passphrase, and the store URL, which may carry credentials — through a
// pipe it inherits as descriptor SecretsFD, never in its environment or
// argv. Any process of the same user can read a process's
// /proc/PID/environ until it makes itself undumpable, and the environment
// the kernel shows there never changes after execve; a pipe is read once
// and gone.

// SecretsFD is the descriptor on which a server started by Start reads its
// secrets (`agentfs mount --secrets-fd`): the first of Start's descriptors
// after the readiness pipe (3).
const SecretsFD = 4

// secretVars are the variables Start moves out of the server's environment
// into its secrets pipe. The server's key source reads them from there.
var secretVars = []string{volkey.EnvKey, volkey.EnvPassphrase}

// droppedVars are variables no mount server needs that Start removes from
// its environment: the new key of `agentfs key rotate`, the daemon's admin
// token, and the name of the URL among the secrets (only Spec.URL sets
// it).
var droppedVars = []string{volkey.EnvNewKey, volkey.EnvNewPassphrase, "AGENTFS_TOKEN", URLSecret}

// maxSecrets bounds what a server reads from its secrets pipe.
const maxSecrets = 1 << 20

// splitSecrets returns env without the variables of secretVars and
// droppedVars, and the assignments of secretVars it held.
func splitSecrets(env []string) (rest, secrets []string) {
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case slices.Contains(secretVars, name):
			secrets = append(secrets, kv)
		case !slices.Contains(droppedVars, name):
			rest = append(rest, kv)
		}
	}
	return rest, secrets
}

// encodeSecrets encodes NAME=VALUE assignments for the secrets pipe: each
// as its length in decimal, a colon, and its bytes, so that a value may
// hold any byte, then the end record, a zero-length entry ("0:"). A
// reader that gets no end record knows the stream was cut short (the
// parent died before it wrote everything, or another process read the
// pipe first) instead of taking what it got, perhaps nothing, for all
// there is.
func encodeSecrets(secrets []string) []byte {
	var b []byte
	for _, kv := range secrets {
		b = strconv.AppendInt(b, int64(len(kv)), 10)
		b = append(b, ':')
		b = append(b, kv...)
	}
	return append(b, "0:"...)
}

// errTruncated is what decodeSecrets returns for a stream that ends
// before its end record.
var errTruncated = errors.New("truncated")

// decodeSecrets is the inverse of encodeSecrets; a later assignment of a
// name wins. It fails with errTruncated if b ends before the end record,
// and with another error if b is not an encoding (a zero-length entry
// before the end, or bytes after it).
func decodeSecrets(b []byte) (map[string]string, error) {
	out := map[string]string{}
	for len(b) > 0 {
		i := bytes.IndexByte(b, ':')
		if i < 0 {
			if _, err := strconv.ParseUint(string(b), 10, 31); err == nil {
				return nil, errTruncated // cut inside a length
			}
			return nil, fmt.Errorf("bad length %q", b)
		}
		n, err := strconv.Atoi(string(b[:i]))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad length %q", b[:i])
		}
		b = b[i+1:]
		if n == 0 {
			if len(b) > 0 {
				return nil, errors.New("a zero-length entry before the end")
			}
			return out, nil
		}
		if n > len(b) {
			return nil, errTruncated // cut inside an entry
		}
		kv := string(b[:n])
		b = b[n:]
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, errors.New("an entry without '='")
		}
		out[name] = value
	}
	return nil, errTruncated
}

// secretsPipe returns the read end of a pipe holding the encoding of
// secrets, for the server to inherit, and writes them from a goroutine
// that closes the write end once written (or once the reader is gone).
// The caller closes the read end once the server has started.
func secretsPipe(secrets []string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("secrets pipe: %w", err)
	}
	data := encodeSecrets(secrets)
	go func() {
		// A server that exits before reading gives EPIPE here; its exit
		// is what Start reports.
		_, _ = w.Write(data)
		_ = w.Close()
	}()
	return r, nil
}

// ReadSecrets reads, in a mount server started by Start, the secrets its
// parent wrote on descriptor fd, closes it, and returns them by variable
// name (AGENTFS_KEY, AGENTFS_PASSPHRASE, AGENTFS_MOUNT_URL; those the
// parent did not have are absent). It fails if fd is negative or not
// open, if what it holds is not an encoding of secrets or is more than
// 1 MiB, and if it ends before the end record that Start writes last:
// then the parent died before it wrote them all, or another process read
// them first, and a server that went on would mount the default store
// for want of a URL.
func ReadSecrets(fd int) (map[string]string, error) {
	if fd < 0 {
		return nil, fmt.Errorf("--secrets-fd %d is not a descriptor", fd)
	}
	f := os.NewFile(uintptr(fd), "secrets")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecrets+1))
	if err != nil {
		return nil, fmt.Errorf("read the secrets on fd %d: %w", fd, err)
	}
	if len(b) > maxSecrets {
		return nil, fmt.Errorf("read the secrets on fd %d: more than %d bytes", fd, maxSecrets)
	}
	s, err := decodeSecrets(b)
	if errors.Is(err, errTruncated) {
		return nil, fmt.Errorf("the secrets on fd %d are truncated: the agentfs process that started this server exited or was interrupted", fd)
	}
	if err != nil {
		return nil, fmt.Errorf("read the secrets on fd %d: %w", fd, err)
	}
	return s, nil
}
