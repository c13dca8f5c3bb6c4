package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize parses a byte count: a non-negative integer with an optional
// binary unit (B, KiB, MiB, GiB, TiB; K, M, G, T and KB, MB, GB, TB mean
// the same binary units), case-insensitive, e.g. "4KiB", "64M", "1048576".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a number with an optional unit such as 4KiB or 64MiB", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	var shift uint
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
		shift = 0
	case "k", "kb", "kib":
		shift = 10
	case "m", "mb", "mib":
		shift = 20
	case "g", "gb", "gib":
		shift = 30
	case "t", "tb", "tib":
		shift = 40
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB, GiB or TiB)", s, t[i:])
	}
	if n > (1<<63-1)>>shift {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n << shift, nil
}

// FormatSize formats a byte count with the largest binary unit that
// divides it exactly ("4KiB", "64MiB", "1000B"), the form ParseSize reads.
func FormatSize(n int64) string { return fmtSize(n) }
