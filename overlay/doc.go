// Package overlay is virtual mode: a copy-on-write workspace over a base
// that nothing the workspace does modifies until someone accepts it.
//
// The base is a commit of the volume (a snapshot, or a branch's head) or a
// directory on the host (HostDir, read through lazily, never written except
// by Commit). The workspace's changes live on a workspace branch of the
// volume ("virtual-NAME"), so they are as durable as any other write and
// survive a remount; every commit of that branch records its base.
//
// Diff lists the changes (added, modified, deleted, renamed paths); Commit
// accepts them — a new commit on the base's branch, or the files written to
// the host directory, atomically per file — and Discard drops them, so that
// the paths show the base again at once.
//
// "Virtual mode" here means copy-on-write, not mere path confinement (which
// some agent libraries call virtual mode; exec.Backend.Scope is that).
//
// This package sits above cache/ (the engine, which reads a Lower) and
// below fs/; it must never import fs/, exec/ or the CLI.
package overlay
