package mountproc

import (
	"slices"
	"testing"
)

func TestServerEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"no GODEBUG", []string{"A=1"}, []string{"A=1", "GODEBUG=madvdontneed=0"}},
		{"empty GODEBUG", []string{"GODEBUG=", "A=1"}, []string{"GODEBUG=madvdontneed=0", "A=1"}},
		{"other settings kept", []string{"GODEBUG=gctrace=1"}, []string{"GODEBUG=gctrace=1,madvdontneed=0"}},
		{"the user's choice wins", []string{"GODEBUG=gctrace=1, madvdontneed=1"}, []string{"GODEBUG=gctrace=1, madvdontneed=1"}},
		{"a similar name is not it", []string{"GODEBUG=xmadvdontneed=1"}, []string{"GODEBUG=xmadvdontneed=1,madvdontneed=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got := ServerEnv(in)
			if !slices.Equal(got, tc.want) {
				t.Errorf("ServerEnv(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("ServerEnv changed its argument to %q", in)
			}
			if !HasServerEnv(got) {
				t.Errorf("HasServerEnv(%q) = false after ServerEnv", got)
			}
		})
	}
	if HasServerEnv([]string{"A=1", "GODEBUG=gctrace=1"}) {
		t.Error("HasServerEnv is true for an environment without madvdontneed")
	}
}
