package bench

import "testing"

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "4096": 4096, "4KiB": 4 << 10, "4k": 4 << 10, "64MiB": 64 << 20, "64M": 64 << 20,
		"1GiB": 1 << 30, "2gb": 2 << 30, " 10 B ": 10, "1TiB": 1 << 40,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "KiB", "-1", "1.5MiB", "4XB", "99999999999999999999", "9000000TiB"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
	for _, n := range []int64{0, 1000, 4 << 10, 64 << 20, 3 << 30} {
		back, err := ParseSize(FormatSize(n))
		if err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}
