package cache

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

// setRapidChecks makes the rapid checks of the calling test run n times,
// unless -rapid.checks was given on the command line (which then wins for
// every store). Rapid's default of 100 runs takes minutes per store.
func setRapidChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil || isFlagSet("rapid.checks") {
		return
	}
	old := f.Value.String()
	_ = f.Value.Set(strconv.Itoa(n))
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
