package console

import (
	"strconv"
	"strings"
	"time"
)

// Charts are SVG drawn by the templates from numbers computed here: no
// script draws them and nothing in them is markup a client chose.

// Chart geometry, in SVG user units (the SVG scales to its box).
const (
	chartW = 600
	chartH = 160
)

// bar is one rectangle of a chart.
type bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// hourChart is the last hour's requests by outcome, one stacked bar a
// minute.
type hourChart struct {
	W, H     int
	Bars     []bar
	Legend   []legendItem
	Max      int64
	Total    int64
	From, To time.Time
}

type legendItem struct {
	Name  string
	Class string
	Total int64
}

// outcomeClass is an outcome's CSS class (its colour).
func outcomeClass(o string) string { return "o-" + strings.ToLower(o) }

func newHourChart(outcomes []string, minutes []Minute) hourChart {
	hc := hourChart{W: chartW, H: chartH}
	totals := make([]int64, len(outcomes))
	for _, m := range minutes {
		var n int64
		for i, v := range m.Counts {
			n += v
			if i < len(totals) {
				totals[i] += v
			}
		}
		hc.Max = max(hc.Max, n)
		hc.Total += n
	}
	for i, o := range outcomes {
		hc.Legend = append(hc.Legend, legendItem{o, outcomeClass(o), totals[i]})
	}
	if len(minutes) > 0 {
		hc.From, hc.To = minutes[0].Start, minutes[len(minutes)-1].Start.Add(time.Minute)
	}
	if hc.Max == 0 || len(minutes) == 0 {
		return hc
	}
	slot := float64(chartW) / float64(len(minutes))
	for k, m := range minutes {
		y := float64(chartH)
		for i, v := range m.Counts {
			if v == 0 || i >= len(outcomes) {
				continue
			}
			h := float64(v) / float64(hc.Max) * float64(chartH)
			y -= h
			hc.Bars = append(hc.Bars, bar{X: float64(k) * slot, Y: y, W: slot * 0.8, H: h, Class: outcomeClass(outcomes[i]),
				Title: m.Start.UTC().Format("15:04") + " UTC: " + strconv.FormatInt(v, 10) + " " + outcomes[i]})
		}
	}
	return hc
}

// dayChart is the last 30 days' spend and savings, summed over tenants
// and models: two bars a day.
type dayChart struct {
	W, H       int
	Bars       []bar
	MaxNanos   int64
	CostNanos  int64
	SavedNanos int64
	From, To   string
}

func newDayChart(today time.Time, rows []DayRow) dayChart {
	const days = 30
	dc := dayChart{W: chartW, H: chartH}
	first := today.AddDate(0, 0, -(days - 1))
	dc.From, dc.To = first.Format(time.DateOnly), today.Format(time.DateOnly)
	cost, saved := make([]int64, days), make([]int64, days)
	for _, row := range rows {
		d, err := time.Parse(time.DateOnly, row.Day)
		if err != nil {
			continue
		}
		i := int(d.Sub(first).Hours() / 24)
		if i < 0 || i >= days {
			continue
		}
		cost[i] += row.CostNanos
		saved[i] += row.SavedNanos
	}
	for i := range days {
		dc.MaxNanos = max(dc.MaxNanos, cost[i], saved[i])
		dc.CostNanos += cost[i]
		dc.SavedNanos += saved[i]
	}
	if dc.MaxNanos == 0 {
		return dc
	}
	slot := float64(chartW) / days
	for i := range days {
		day := first.AddDate(0, 0, i).Format(time.DateOnly)
		for j, v := range []int64{cost[i], saved[i]} {
			if v == 0 {
				continue
			}
			h := float64(v) / float64(dc.MaxNanos) * float64(chartH)
			class, what := "d-cost", " spent"
			if j == 1 {
				class, what = "d-saved", " saved"
			}
			dc.Bars = append(dc.Bars, bar{X: float64(i)*slot + float64(j)*slot*0.42, Y: float64(chartH) - h, W: slot * 0.4, H: h, Class: class,
				Title: day + ": " + Dollars(v) + what})
		}
	}
	return dc
}
