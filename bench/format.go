package bench

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// fmtNum formats a rate with about three significant digits.
func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', 2, 64) + "M"
	default:
		return trim3(v)
	}
}

// fmtDur formats a latency with about three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s"
	case d >= time.Millisecond:
		return trim3(float64(d)/1e6) + "ms"
	case d >= time.Microsecond:
		return trim3(float64(d)/1e3) + "µs"
	default:
		return fmt.Sprintf("%dns", d.Nanoseconds())
	}
}

func trim3(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// fmtSpread formats Summary.Spread as a percentage.
func fmtSpread(s Summary) string {
	if s.N < 2 {
		return "-"
	}
	if math.IsNaN(s.Spread) || math.IsInf(s.Spread, 0) {
		return "?"
	}
	return strconv.FormatFloat(s.Spread*100, 'f', 0, 64) + "%"
}

// fmtSize formats a byte count in binary units.
func fmtSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	default:
		return fmt.Sprintf("%dB", n)
	}
}
