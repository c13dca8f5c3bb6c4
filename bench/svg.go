package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
)

// barChart is one grouped bar chart: Values[g][s] is the bar of series s
// in group g; NaN draws no bar.
type barChart struct {
	Title  string
	YLabel string
	Groups []string
	Series []string
	Values [][]float64
	Log    bool    // logarithmic y axis (values must be > 0)
	RefY   float64 // if > 0, a dashed reference line at this value
}

// palette is readable for the common kinds of colour blindness (Okabe-Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"}

const (
	chartW      = 960
	chartH      = 360
	marginL     = 70
	marginR     = 20
	marginT     = 40
	marginB     = 110
	legendRowH  = 18
	chartGap    = 30
	svgFontSize = 12
)

// writeSVG writes the charts stacked vertically in one standalone SVG
// document, under a title line.
func writeSVG(w io.Writer, title, subtitle string, charts []barChart) error {
	ew := &errWriter{w: w}
	heights := make([]int, len(charts))
	total := 50
	for i, c := range charts {
		per := c.legendPerRow()
		heights[i] = chartH + legendRowH*((len(c.Series)+per-1)/per)
		total += heights[i] + chartGap
	}
	ew.printf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Arial, sans-serif" font-size="%d">`+"\n",
		chartW, total, chartW, total, svgFontSize)
	ew.printf(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	ew.printf(`<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", marginL, esc(title))
	ew.printf(`<text x="%d" y="40" fill="#555555">%s</text>`+"\n", marginL, esc(subtitle))
	y := 50
	for i, c := range charts {
		ew.printf(`<g transform="translate(0,%d)">`+"\n", y)
		c.render(ew)
		ew.printf("</g>\n")
		y += heights[i] + chartGap
	}
	ew.printf("</svg>\n")
	return ew.err
}

func esc(s string) string { return html.EscapeString(s) }

func (c barChart) render(ew *errWriter) {
	plotW := float64(chartW - marginL - marginR)
	plotH := float64(chartH - marginT - marginB)
	top := float64(marginT)
	bottom := top + plotH
	ew.printf(`<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", marginL, esc(c.Title))
	lo, hi := c.bounds()
	scale := func(v float64) float64 {
		if c.Log {
			return bottom - (math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*plotH
		}
		return bottom - (v-lo)/(hi-lo)*plotH
	}
	// Grid and y axis labels.
	for _, t := range c.ticks(lo, hi) {
		y := scale(t)
		ew.printf(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#dddddd"/>`+"\n", marginL, y, chartW-marginR, y)
		ew.printf(`<text x="%d" y="%.1f" text-anchor="end" fill="#333333">%s</text>`+"\n", marginL-6, y+4, esc(tickLabel(t)))
	}
	ew.printf(`<text transform="translate(16,%.1f) rotate(-90)" text-anchor="middle" fill="#333333">%s</text>`+"\n", top+plotH/2, esc(c.YLabel))
	if c.RefY > 0 && c.RefY >= lo && c.RefY <= hi {
		y := scale(c.RefY)
		ew.printf(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#444444" stroke-dasharray="4 3"/>`+"\n", marginL, y, chartW-marginR, y)
	}
	// Bars.
	ng, ns := len(c.Groups), len(c.Series)
	if ng > 0 && ns > 0 {
		groupW := plotW / float64(ng)
		barW := groupW * 0.8 / float64(ns)
		for g, name := range c.Groups {
			gx := float64(marginL) + groupW*float64(g)
			for s := range ns {
				v := c.Values[g][s]
				if math.IsNaN(v) || (c.Log && v <= 0) {
					continue
				}
				x := gx + groupW*0.1 + barW*float64(s)
				yv := scale(math.Max(math.Min(v, hi), lo))
				ew.printf(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %s</title></rect>`+"\n",
					x, yv, math.Max(barW-1, 1), bottom-yv, palette[s%len(palette)], esc(name), esc(c.Series[s]), esc(tickLabel(v)))
				if barW >= 14 {
					ew.printf(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9" fill="#222222">%s</text>`+"\n", x+barW/2, yv-3, esc(tickLabel(v)))
				}
			}
			lx := gx + groupW/2
			ew.printf(`<text transform="translate(%.1f,%.1f) rotate(-35)" text-anchor="end" fill="#222222">%s</text>`+"\n", lx, bottom+14, esc(name))
		}
	}
	ew.printf(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#000000"/>`+"\n", marginL, bottom, chartW-marginR, bottom)
	// Legend, as many entries a row as their labels allow.
	per := c.legendPerRow()
	slot := (chartW - marginL - marginR) / per
	for s, name := range c.Series {
		lx := marginL + (s%per)*slot
		ly := chartH - 12 + (s/per)*legendRowH
		ew.printf(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, ly-10, palette[s%len(palette)])
		ew.printf(`<text x="%d" y="%d">%s</text>`+"\n", lx+18, ly, esc(truncateMiddle(name, (slot-26)/legendCharW)))
	}
}

// legendCharW is the width of a legend character at svgFontSize, rounded
// up, for fitting labels into their slots.
const legendCharW = 7

// legendPerRow returns how many legend entries fit in a row: four, or
// fewer when the labels are long.
func (c barChart) legendPerRow() int {
	longest := 0
	for _, s := range c.Series {
		longest = max(longest, len([]rune(s)))
	}
	slot := chartW - marginL - marginR
	for _, per := range []int{4, 3, 2} {
		if (slot/per-26)/legendCharW >= longest {
			return per
		}
	}
	return 1
}

// bounds returns the y range: from 0 (linear) or the decade below the
// smallest value (log) to a little above the largest.
func (c barChart) bounds() (lo, hi float64) {
	hi = math.Inf(-1)
	low := math.Inf(1)
	for _, row := range c.Values {
		for _, v := range row {
			if math.IsNaN(v) || (c.Log && v <= 0) {
				continue
			}
			hi = math.Max(hi, v)
			low = math.Min(low, v)
		}
	}
	if c.RefY > 0 {
		hi = math.Max(hi, c.RefY)
		low = math.Min(low, c.RefY)
	}
	if math.IsInf(hi, -1) {
		if c.Log {
			return 1, 10
		}
		return 0, 1
	}
	if c.Log {
		return math.Pow(10, math.Floor(math.Log10(low)-0.3)), math.Pow(10, math.Ceil(math.Log10(hi)+0.05))
	}
	if hi <= 0 {
		return 0, 1
	}
	step := niceStep(hi * 1.1 / 5)
	return 0, math.Ceil(hi*1.1/step) * step
}

func (c barChart) ticks(lo, hi float64) []float64 {
	var out []float64
	if c.Log {
		for v := lo; v <= hi*1.0001; v *= 10 {
			out = append(out, v)
		}
		return out
	}
	step := niceStep((hi - lo) / 5)
	for v := lo; v <= hi+step/1000; v += step {
		out = append(out, v)
	}
	return out
}

// niceStep rounds x up to 1, 2 or 5 times a power of ten.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

func tickLabel(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case v >= 1e3:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// truncateMiddle shortens s to n runes by replacing its middle with an
// ellipsis (the ends of a path tell targets apart).
func truncateMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 5 {
		return s
	}
	head := (n - 1) / 3
	tail := n - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// WriteSVG writes r as a bar chart: for every workload phase, each
// target's median ops/s relative to the first target's (first = 1, higher
// is faster), with a dashed line at 1.
func WriteSVG(w io.Writer, r *Report) error {
	c := barChart{Title: "Throughput relative to target [1] (median ops/s over repeats)", YLabel: "× target [1]", RefY: 1}
	for i, t := range r.Targets {
		label := fmt.Sprintf("[%d] %s", i+1, t.Dir)
		if t.Agentfs != "" {
			label += " (agentfs)"
		} else if t.FSType != "" {
			label += " (" + t.FSType + ")"
		}
		c.Series = append(c.Series, label)
	}
	index := map[string]int{}
	for _, res := range r.Results {
		name := res.Workload + "/" + res.Phase
		g, ok := index[name]
		if !ok {
			g = len(c.Groups)
			index[name] = g
			c.Groups = append(c.Groups, name)
			row := make([]float64, len(r.Targets))
			for i := range row {
				row[i] = math.NaN()
			}
			c.Values = append(c.Values, row)
		}
		if res.Ratio != nil {
			c.Values[g][res.Target] = *res.Ratio
		}
	}
	sub := fmt.Sprintf("agentfs bench, %d repeat(s), %s", r.Repeats, r.Started.Format("2006-01-02 15:04 UTC"))
	return writeSVG(w, "agentfs bench", sub+"; "+r.Machine.String(), []barChart{c})
}
