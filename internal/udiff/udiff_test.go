package udiff

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/internal/testenv"
)

func TestUnifiedExamples(t *testing.T) {
	cases := []struct {
		name, a, b, want string
	}{
		{"equal", "x\ny\n", "x\ny\n", ""},
		{"change", "a\nb\nc\nd\ne\n", "a\nb\nC\nd\ne\n",
			"--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n"},
		{"insert at start", "b\n", "a\nb\n", "--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n+a\n b\n"},
		{"from empty", "", "a\n", "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+a\n"},
		{"to empty", "a\nb\n", "", "--- a/f\n+++ b/f\n@@ -1,2 +0,0 @@\n-a\n-b\n"},
		{"no newline", "a\nb", "a\nc", "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\nY\n12\n",
			"--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n 1\n-2\n+X\n 3\n@@ -10,3 +10,3 @@\n 10\n-11\n+Y\n 12\n"},
	}
	for _, c := range cases {
		got := Unified("a/f", "b/f", []byte(c.a), []byte(c.b), 1)
		if got != c.want {
			t.Errorf("%s:\n%s\nwant:\n%s", c.name, got, c.want)
		}
	}
}

// apply rebuilds b from a and an edit script, checking the script's shape.
func apply(t *testing.T, a, b []string, ops []Op) []string {
	t.Helper()
	var out []string
	ia, ib := 0, 0
	for _, o := range ops {
		switch o.Kind {
		case ' ':
			if o.A != ia || o.B != ib || a[o.A] != b[o.B] {
				t.Fatalf("bad equal op %+v at a%d b%d", o, ia, ib)
			}
			out = append(out, a[ia])
			ia++
			ib++
		case '-':
			if o.A != ia {
				t.Fatalf("bad delete op %+v at a%d", o, ia)
			}
			ia++
		case '+':
			if o.B != ib {
				t.Fatalf("bad insert op %+v at b%d", o, ib)
			}
			out = append(out, b[ib])
			ib++
		}
	}
	if ia != len(a) || ib != len(b) {
		t.Fatalf("script covers a[:%d] b[:%d] of %d/%d", ia, ib, len(a), len(b))
	}
	return out
}

func lcs(a, b []string) int {
	dp := make([][]int, len(a)+1)
	for i := range dp {
		dp[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				dp[i][j] = dp[i+1][j+1] + 1
			} else {
				dp[i][j] = max(dp[i+1][j], dp[i][j+1])
			}
		}
	}
	return dp[0][0]
}

func TestEditsAreValidAndMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		gen := func() []string {
			n := rng.IntN(12)
			out := make([]string, n)
			for i := range out {
				out[i] = string(rune('a' + rng.IntN(4)))
			}
			return out
		}
		a, b := gen(), gen()
		ops := Edits(a, b)
		got := apply(t, a, b, ops)
		if strings.Join(got, "") != strings.Join(b, "") {
			t.Fatalf("iter %d: rebuilt %v, want %v", iter, got, b)
		}
		eq := 0
		for _, o := range ops {
			if o.Kind == ' ' {
				eq++
			}
		}
		if want := lcs(a, b); eq != want {
			t.Fatalf("iter %d: %v -> %v keeps %d lines, LCS is %d", iter, a, b, eq, want)
		}
	}
}

func TestEditsFallBackWhenTooDifferent(t *testing.T) {
	var a, b []string
	for i := range MaxEdits + 10 {
		a = append(a, fmt.Sprintf("a%d\n", i))
		b = append(b, fmt.Sprintf("b%d\n", i))
	}
	a = append([]string{"same\n"}, a...)
	b = append([]string{"same\n"}, b...)
	ops := Edits(a, b)
	apply(t, a, b, ops)
	if ops[0].Kind != ' ' || len(ops) != 1+2*(MaxEdits+10) {
		t.Fatalf("fallback script has %d ops", len(ops))
	}
}

// TestMatchesDiffTool compares hunks with GNU diff -u when it is installed.
func TestMatchesDiffTool(t *testing.T) {
	tool, err := exec.LookPath("diff")
	if err != nil {
		testenv.Missing(t, "GNU diff (diffutils)", err)
	}
	dir := t.TempDir()
	a := "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n"
	b := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {\n\tfmt.Println(\"hello\", os.Args)\n}\n"
	pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(pa, []byte(a), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pb, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(tool, "-u", "--label", "a/x", "--label", "b/x", pa, pb).Output()
	if got := Unified("a/x", "b/x", []byte(a), []byte(b), 3); got != string(out) {
		t.Fatalf("got:\n%s\ndiff -u:\n%s", got, out)
	}
}
