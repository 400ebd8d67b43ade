package portal

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"hookrelay/delivery"
	"hookrelay/store"
)

// funcs are the templates' helpers; none of them returns unescaped HTML.
var funcs = template.FuncMap{
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		case *time.Time:
			if v == nil {
				return "—"
			}
			return v.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		return ""
	},
	"code": func(c *int) string {
		if c == nil {
			return "—"
		}
		return fmt.Sprint(*c)
	},
	"join":     strings.Join,
	"contains": slices.Contains[[]string],
	"pct":      func(f float64) string { return fmt.Sprintf("%.1f %%", f*100) },
	"seconds":  func(ms int64) string { return fmt.Sprintf("%d ms", ms) },
	"str":      func(v any) string { return fmt.Sprint(v) },
	"verdict":  verdictLabel,
}

// Bar is one hour of the stats chart: stacked segments, bottom up.
type Bar struct {
	X     int
	Label string
	// Tick shows Label under the bar (every chartTickEvery hours).
	Tick     bool
	Segments []Segment
	Total    int
}

// Segment is one outcome's part of a bar.
type Segment struct {
	Y, H  int
	Class string
	Count int
}

// Chart is the deliveries-per-hour chart, drawn as SVG by the template.
type Chart struct {
	// Width and Height are the SVG's; BaseY is the bars' baseline, above
	// the hour labels.
	Width, Height, BaseY int
	Bars                 []Bar
	Max                  int
	Legend               []Segment
}

// chartOutcomes are the chart's stacked outcomes, bottom up, each with the
// statuses it counts.
var chartOutcomes = []struct {
	class    string
	statuses []delivery.Status
}{
	{"succeeded", []delivery.Status{delivery.StatusSucceeded}},
	{"in-flight", delivery.InFlight()},
	{"dead", []delivery.Status{delivery.StatusDeadLettered}},
	{"canceled", []delivery.Status{delivery.StatusCanceled}},
}

// chart geometry
const (
	chartBarWidth = 24
	chartGap      = 4
	chartHeight   = 160
	// chartLabelSpace is the room under the bars for hour labels.
	chartLabelSpace = 18
	chartTickEvery  = 4
)

func hourlyChart(hours []store.HourCount) Chart {
	ch := Chart{Width: len(hours) * (chartBarWidth + chartGap), Height: chartHeight + chartLabelSpace, BaseY: chartHeight + chartLabelSpace - 4}
	for _, h := range hours {
		total := 0
		for _, n := range h.ByStatus {
			total += n
		}
		ch.Max = max(ch.Max, total)
	}
	for i, h := range hours {
		b := Bar{X: i * (chartBarWidth + chartGap), Label: h.Hour.UTC().Format("15h"), Tick: i%chartTickEvery == 0}
		y := chartHeight
		for _, o := range chartOutcomes {
			n := 0
			for _, st := range o.statuses {
				n += h.ByStatus[st]
			}
			b.Total += n
			if n == 0 || ch.Max == 0 {
				continue
			}
			height := max(1, n*chartHeight/ch.Max)
			y -= height
			b.Segments = append(b.Segments, Segment{Y: y, H: height, Class: o.class, Count: n})
		}
		ch.Bars = append(ch.Bars, b)
	}
	for _, o := range chartOutcomes {
		ch.Legend = append(ch.Legend, Segment{Class: o.class})
	}
	return ch
}
