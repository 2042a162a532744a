package bench

import (
	"math"
	"slices"
	"time"
)

// Summary describes a set of durations, in milliseconds.
type Summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

// summarize sorts d in place and describes it. Percentiles are nearest
// rank: p99 of 100 samples is the 99th smallest, of 10 samples the
// largest.
func summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return Summary{
		N:    len(d),
		Mean: ms(sum / time.Duration(len(d))),
		P50:  ms(percentile(d, 50)),
		P90:  ms(percentile(d, 90)),
		P99:  ms(percentile(d, 99)),
		Max:  ms(d[len(d)-1]),
	}
}

// percentile is the nearest-rank percentile of sorted d.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Spread is the median and range of one number over repetitions.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// spreadOf describes xs. NaNs and infinities (a repetition that produced
// no number) are left out; with nothing left the Spread is zero with N 0,
// since JSON has no NaN.
func spreadOf(xs []float64) Spread {
	v := make([]float64, 0, len(xs))
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Spread{}
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Spread{Median: med, Min: v[0], Max: v[len(v)-1], N: len(v)}
}
