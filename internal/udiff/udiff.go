// Package udiff computes line diffs of text and formats them as unified
// diffs (the `diff -u` / `git diff` format), for `agentfs snapshot diff -p`
// and any other command that shows content changes.
//
// The diff is Myers' O(ND) algorithm on the lines left after removing the
// common prefix and suffix. When the two texts differ in more than
// MaxEdits lines it gives up on minimality and reports the differing middle
// as replaced: the output is always a correct diff, only not always the
// shortest one, and time and memory stay bounded (O(MaxEdits²) memory).
package udiff

import (
	"bytes"
	"fmt"
	"strings"
)

// MaxEdits bounds the edit distance searched for a minimal diff.
const MaxEdits = 2000

// Op is one line of an edit script.
type Op struct {
	Kind byte // ' ' (both), '-' (only in a), '+' (only in b)
	A, B int  // line index in a (for ' ' and '-') and in b (for ' ' and '+')
}

// Lines splits text into lines, each keeping its "\n" (the last one may
// lack it).
func Lines(text []byte) []string {
	var out []string
	for len(text) > 0 {
		i := bytes.IndexByte(text, '\n')
		if i < 0 {
			out = append(out, string(text))
			break
		}
		out = append(out, string(text[:i+1]))
		text = text[i+1:]
	}
	return out
}

// Edits returns an edit script turning a into b: every line of a and b
// appears once, in order.
func Edits(a, b []string) []Op {
	var ops []Op
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		ops = append(ops, Op{' ', pre, pre})
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	mid, ok := myers(ma, mb)
	if !ok {
		mid = mid[:0]
		for i := range ma {
			mid = append(mid, Op{'-', i, 0})
		}
		for j := range mb {
			mid = append(mid, Op{'+', len(ma), j})
		}
	}
	for _, o := range mid {
		o.A += pre
		o.B += pre
		ops = append(ops, o)
	}
	for k := range suf {
		ops = append(ops, Op{' ', len(a) - suf + k, len(b) - suf + k})
	}
	return ops
}

// myers returns a shortest edit script, or false if it has more than
// MaxEdits edits.
func myers(a, b []string) ([]Op, bool) {
	n, m := len(a), len(b)
	if n == 0 && m == 0 {
		return nil, true
	}
	maxD := min(n+m, MaxEdits)
	off := maxD + 1
	v := make([]int, 2*off+1)
	var trace [][]int // trace[d][k+d]: furthest x on diagonal k after d edits
	for d := 0; d <= maxD; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
				return backtrack(trace, n, m), true
			}
		}
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
	}
	return nil, false
}

func backtrack(trace [][]int, n, m int) []Op {
	var rev []Op
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		prev := trace[d-1]
		get := func(k int) int { return prev[k+d-1] }
		k := x - y
		var pk int
		if k == -d || k != d && get(k-1) < get(k+1) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := get(pk)
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, Op{' ', x, y})
		}
		if x == px {
			y--
			rev = append(rev, Op{'+', x, y})
		} else {
			x--
			rev = append(rev, Op{'-', x, y})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, Op{' ', x, y})
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// Unified returns the unified diff from a to b with context lines of
// context around each change, headed "--- aName" and "+++ bName". Equal
// texts give "".
func Unified(aName, bName string, a, b []byte, context int) string {
	la, lb := Lines(a), Lines(b)
	ops := Edits(la, lb)
	var sb strings.Builder
	i := 0
	for i < len(ops) {
		// Find the next change.
		for i < len(ops) && ops[i].Kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		if sb.Len() == 0 {
			fmt.Fprintf(&sb, "--- %s\n+++ %s\n", aName, bName)
		}
		start := max(0, i-context)
		// Extend over changes closer than 2*context apart.
		end := i
		for {
			for end < len(ops) && ops[end].Kind != ' ' {
				end++
			}
			next := end
			for next < len(ops) && ops[next].Kind == ' ' {
				next++
			}
			if next < len(ops) && next-end <= 2*context {
				end = next
				continue
			}
			end = min(len(ops), end+context)
			break
		}
		writeHunk(&sb, ops[start:end], la, lb)
		i = end
	}
	return sb.String()
}

func writeHunk(sb *strings.Builder, ops []Op, a, b []string) {
	aStart, bStart, aLen, bLen := -1, -1, 0, 0
	for _, o := range ops {
		if o.Kind != '+' {
			if aStart < 0 {
				aStart = o.A
			}
			aLen++
		}
		if o.Kind != '-' {
			if bStart < 0 {
				bStart = o.B
			}
			bLen++
		}
	}
	// An empty side is numbered by the line before the hunk.
	if aStart < 0 {
		aStart = ops[0].A - 1
	}
	if bStart < 0 {
		bStart = ops[0].B - 1
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
	for _, o := range ops {
		line := ""
		switch o.Kind {
		case '+':
			line = b[o.B]
		default:
			line = a[o.A]
		}
		sb.WriteByte(o.Kind)
		sb.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	if n == 0 {
		return fmt.Sprintf("%d,0", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
