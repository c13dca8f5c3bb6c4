// Package volkey reads the user's key of an encrypted volume from where
// the agentfs commands take it: a key file (--key-file), the AGENTFS_KEY
// environment variable, the AGENTFS_PASSPHRASE environment variable, or a
// passphrase typed at the terminal, in that order. It only reads keys; the
// snapshot package derives, wraps and checks them.
package volkey

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/snapshot"
)

// Environment variables holding keys. The NEW ones are the new key of
// `agentfs key rotate`.
const (
	EnvKey           = "AGENTFS_KEY"
	EnvPassphrase    = "AGENTFS_PASSPHRASE"
	EnvNewKey        = "AGENTFS_NEW_KEY"
	EnvNewPassphrase = "AGENTFS_NEW_PASSPHRASE"
)

// Source says where to find a key. The zero value of a field means: none
// (for Getenv: os.Getenv).
type Source struct {
	KeyFile  string              // a file holding the key (its content, surrounding white space trimmed)
	FileFlag string              // the flag that names KeyFile, for messages ("--key-file")
	KeyEnv   string              // the variable holding a key (EnvKey)
	PassEnv  string              // the variable holding a passphrase (EnvPassphrase)
	Getenv   func(string) string // os.Getenv when nil
	Terminal *os.File            // where to prompt for a passphrase; nil: never prompt
	Prompt   io.Writer           // where the prompt is written (the terminal's stderr)
	Label    string              // what is asked for, in the prompt ("passphrase of s3://…")
	Confirm  bool                // ask twice at the prompt (a new passphrase)
}

// Default returns the Source of the commands that open a volume: keyFile
// (the --key-file flag; "" for none), AGENTFS_KEY, AGENTFS_PASSPHRASE,
// then a prompt on stdin when stdin is a terminal.
func Default(keyFile string) Source {
	s := Source{KeyFile: keyFile, FileFlag: "--key-file", KeyEnv: EnvKey, PassEnv: EnvPassphrase, Prompt: os.Stderr, Label: "passphrase of the volume"}
	if IsTerminal(os.Stdin) {
		s.Terminal = os.Stdin
	}
	return s
}

// Keys returns s as a snapshot.KeySource: the volume asks for a key or a
// passphrase, and Get finds one.
func (s Source) Keys() snapshot.KeySource { return s.Get }

// Get returns the first key s finds: the key file, the key variable, the
// passphrase variable, then (when passphrase is true, or nothing else can
// be) a passphrase read from the terminal without echo. It fails, saying
// what could be passed, when there is none.
func (s Source) Get(passphrase bool) (snapshot.UserKey, error) {
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	switch {
	case s.KeyFile != "":
		b, err := os.ReadFile(s.KeyFile)
		if err != nil {
			return snapshot.UserKey{}, fmt.Errorf("%s: %w", s.FileFlag, err)
		}
		return snapshot.UserKey{Key: bytes.TrimSpace(b)}, nil
	case s.KeyEnv != "" && getenv(s.KeyEnv) != "":
		return snapshot.UserKey{Key: bytes.TrimSpace([]byte(getenv(s.KeyEnv)))}, nil
	case s.PassEnv != "" && getenv(s.PassEnv) != "":
		return snapshot.UserKey{Passphrase: []byte(getenv(s.PassEnv))}, nil
	case s.Terminal != nil:
		p, err := s.prompt()
		if err != nil {
			return snapshot.UserKey{}, err
		}
		return snapshot.UserKey{Passphrase: p}, nil
	}
	return snapshot.UserKey{}, fmt.Errorf("no key given: none of %s", s.options())
}

// options lists where s looks, for messages.
func (s Source) options() string {
	var out []string
	if s.FileFlag != "" {
		out = append(out, s.FileFlag+" FILE")
	}
	if s.KeyEnv != "" {
		out = append(out, s.KeyEnv)
	}
	if s.PassEnv != "" {
		out = append(out, s.PassEnv)
	}
	out = append(out, "a terminal on stdin to type a passphrase at")
	msg := out[0]
	for i, o := range out[1:] {
		if i == len(out)-2 {
			msg += " or " + o
		} else {
			msg += ", " + o
		}
	}
	return msg
}

func (s Source) prompt() ([]byte, error) {
	p, err := s.readHidden(s.Label + ": ")
	if err != nil || !s.Confirm {
		return p, err
	}
	again, err := s.readHidden("again: ")
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(p, again) {
		return nil, errors.New("the two passphrases differ")
	}
	return p, nil
}

// readHidden prints prompt and reads a line from the terminal with echo off.
func (s Source) readHidden(prompt string) ([]byte, error) {
	fd := int(s.Terminal.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, fmt.Errorf("read a passphrase: %w", err)
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return nil, fmt.Errorf("read a passphrase: %w", err)
	}
	defer func() { _ = unix.IoctlSetTermios(fd, unix.TCSETS, old) }()
	if s.Prompt != nil {
		_, _ = io.WriteString(s.Prompt, prompt)
		defer func() { _, _ = io.WriteString(s.Prompt, "\n") }()
	}
	line, err := bufio.NewReader(s.Terminal).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read a passphrase: %w", err)
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

// Assignment returns the NAME=VALUE assignment that hands k to a mount
// server among its secrets (mountproc.Spec.Secrets, read from a pipe, not
// its environment): AGENTFS_KEY for a key, AGENTFS_PASSPHRASE for a
// passphrase; the first place Default looks after --key-file.
func Assignment(k snapshot.UserKey) []string {
	if k.IsPassphrase() {
		return []string{EnvPassphrase + "=" + string(k.Passphrase)}
	}
	return []string{EnvKey + "=" + string(k.Key)}
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// AbsKeyFile returns path made absolute (for a server that runs in "/").
func AbsKeyFile(path string) string {
	if path == "" {
		return ""
	}
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}
