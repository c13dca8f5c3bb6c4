#!/usr/bin/env bash
# Checks that the depguard rules of .golangci.yml bite. Every package under
# scripts/testdata/depguard sits at a path that mirrors the tree (its
# blobstore/probe.go matches the rules' "**/blobstore/**", ...) and imports
# what the rules for that place deny; each import's comment names the
# rules that must report it ("// depguard: exec exec-code"), or "-" for
# an import that must pass. golangci-lint runs depguard alone over the
# probes, and the rules it reports must be exactly the ones named: a rule
# that stops matching its files, loses a deny, or starts denying what it
# allows fails this check. (go's ./... skips testdata, so the probes never
# reach the build, vet or the lint of the tree.) The bench rule has no
# probe: it denies only cmd/, whose one package is a main package, which Go
# refuses to import anyway. `make test` and `make lint` run it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh

probes=scripts/testdata/depguard
# "path:line rule" for every rule named on an import line.
want=$(grep -rn --include='*.go' '// depguard:' "$probes" |
	sed -E 's|^([^:]+):([0-9]+):.*// depguard:(.*)$|\1:\2 \3|' |
	awk '{for (i = 2; i <= NF; i++) if ($i != "-") print $1 " " $i}' | sort)
[ -n "$want" ] || die "no probe in $probes names a rule"

dirs=$(find "$probes" -name '*.go' -printf '%h\n' | sort -u | sed 's|^|./|')
set +e
# shellcheck disable=SC2086 # one argument per probe package
out=$(golangci-lint run --enable-only depguard --max-issues-per-linter 0 --max-same-issues 0 \
	--uniq-by-line=false --output.text.print-issued-lines=false --output.text.colors=false $dirs 2>&1)
rc=$?
set -e
got=$(printf '%s\n' "$out" |
	sed -nE "s|^([^:]+):([0-9]+):[0-9]+: import '[^']*' is not allowed from list '([^']*)'.*\(depguard\)$|\1:\2 \3|p" | sort)
if [ "$rc" -ne 1 ] || [ "$want" != "$got" ]; then
	printf '%s\n' "$out" >&2
	diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | sed -n 's/^</missing: /p; s/^>/unexpected: /p' >&2 || true
	die "the depguard rules do not report what the probes in $probes name (golangci-lint exit status $rc)"
fi
log "depguard: the $(printf '%s\n' "$want" | wc -l) denials the probes name are reported, and nothing else"
