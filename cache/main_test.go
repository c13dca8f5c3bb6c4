package cache

import (
	"flag"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The model test's default of 100 runs takes minutes; CI runs 30 per
	// store. -rapid.checks=N on the command line overrides this.
	if f := flag.Lookup("rapid.checks"); f != nil && !isFlagSet("rapid.checks") {
		_ = f.Value.Set("30")
	}
	os.Exit(m.Run())
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
