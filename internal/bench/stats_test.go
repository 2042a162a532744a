package bench

import (
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummarize(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := summarize(d)
	want := Summary{N: 100, Mean: 50.5, P50: 50, P90: 90, P99: 99, Max: 100}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summarize(1..100 ms) mismatch (-want +got):\n%s", diff)
	}
	if got := summarize(nil); got != (Summary{}) {
		t.Errorf("summarize(nil) = %+v, want zero", got)
	}
}

func TestPercentileSmallSets(t *testing.T) {
	tests := []struct {
		give []time.Duration
		p    float64
		want time.Duration
	}{
		{give: []time.Duration{5}, p: 50, want: 5},
		{give: []time.Duration{5}, p: 99, want: 5},
		{give: []time.Duration{1, 2}, p: 50, want: 1},
		{give: []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, p: 99, want: 10},
		{give: []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, p: 90, want: 9},
	}
	for _, tt := range tests {
		if got := percentile(tt.give, tt.p); got != tt.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tt.give, tt.p, got, tt.want)
		}
	}
}

func TestSpreadOf(t *testing.T) {
	tests := []struct {
		give []float64
		want Spread
	}{
		{give: []float64{3, 1, 2}, want: Spread{Median: 2, Min: 1, Max: 3, N: 3}},
		{give: []float64{4, 1, 2, 3}, want: Spread{Median: 2.5, Min: 1, Max: 4, N: 4}},
		{give: []float64{ratio(1, 0), 2}, want: Spread{Median: 2, Min: 2, Max: 2, N: 1}},
		{give: nil, want: Spread{}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, spreadOf(tt.give)); diff != "" {
			t.Errorf("spreadOf(%v) mismatch (-want +got):\n%s", tt.give, diff)
		}
	}
}

func TestParseCommandStats(t *testing.T) {
	give := "# Commandstats\r\n" +
		"cmdstat_mget:calls=1200,usec=3000,usec_per_call=2.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n"
	want := map[string]int64{"mget": 1200, "info": 3}
	if diff := cmp.Diff(want, parseCommandStats(give)); diff != "" {
		t.Errorf("parseCommandStats mismatch (-want +got):\n%s", diff)
	}
}

func TestPerRequest(t *testing.T) {
	before := map[string]int64{"mget": 100, "info": 4, readsKey: 110}
	after := map[string]int64{"mget": 1100, "info": 6, readsKey: 1112, "hello": 1}
	got := perRequest(before, after, 1000)
	want := map[string]float64{"mget": 1, "hello": 0.001, readsKey: 1, "total": 1.001}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("perRequest mismatch (-want +got):\n%s", diff)
	}
}

func TestReadStream(t *testing.T) {
	const done = "data: {\"x\":1}\n\ndata: [DONE]\n\n"
	tests := []struct {
		name    string
		give    string
		wantErr bool
	}{
		{name: "complete", give: done},
		{name: "long complete", give: strings.Repeat("data: {\"chunk\":\"abcdefgh\"}\n\n", 50) + "data: [DONE]\n\n"},
		{name: "cut", give: "data: {\"x\":1}\n\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// OneByteReader splits the [DONE] event over many reads.
			ttfb, total, err := readStream(iotest.OneByteReader(strings.NewReader(tt.give)), time.Now(), make([]byte, 64))
			if (err != nil) != tt.wantErr {
				t.Fatalf("readStream err = %v, wantErr %v", err, tt.wantErr)
			}
			if ttfb <= 0 || total < ttfb {
				t.Errorf("ttfb %v, total %v: want 0 < ttfb <= total", ttfb, total)
			}
		})
	}
}

func TestThousands(t *testing.T) {
	tests := []struct {
		give float64
		want string
	}{
		{give: 0, want: "0"},
		{give: 999.6, want: "1,000"},
		{give: 12345, want: "12,345"},
		{give: 1234567, want: "1,234,567"},
		{give: -4321, want: "-4,321"},
	}
	for _, tt := range tests {
		if got := thousands(tt.give); got != tt.want {
			t.Errorf("thousands(%v) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

// A streaming run whose window closed before any stream completed has no
// TTFB: the group's TTFB comes from the runs that have one, and the report
// writes a dash for a group with none instead of failing.
func TestStreamingGroupsWithoutTTFB(t *testing.T) {
	g := Group{Case: streamCase(), Target: "corral-redis", Runs: []RunResult{
		{Throughput: 10},
		{Throughput: 12, TTFB: &Summary{N: 5, P50: 1.5, P99: 3}},
		{Throughput: 11, TTFB: &Summary{N: 4, P50: 2.5, P99: 4}},
	}}
	g.aggregate()
	if g.TTFBP50 == nil || g.TTFBP50.N != 2 || g.TTFBP50.Median != 2 || g.TTFBP99.Max != 4 {
		t.Fatalf("TTFB p50 = %+v, p99 = %+v; want the two runs that had one", g.TTFBP50, g.TTFBP99)
	}
	floor := Group{Runs: []RunResult{
		{TTFB: &Summary{N: 5, P50: 1}}, {TTFB: &Summary{N: 5, P50: 1}}, {TTFB: &Summary{N: 5, P50: 1}},
	}}
	if d := paired(&g, &floor, ttfbP50Of, delta); d.N != 2 || d.Median != 1 || d.Min != 0.5 {
		t.Errorf("TTFB over the floor = %+v; want the two pairs with a TTFB on both sides (+0.5, +1.5)", d)
	}
	none := Group{Case: streamCase(), Target: "floor", Runs: []RunResult{{Throughput: 9}}}
	none.aggregate()
	var out strings.Builder
	writeStreaming(&out, []Group{none, g}, nil)
	if !strings.Contains(out.String(), "| floor | – | – |") {
		t.Errorf("report:\n%s\nwant a dash for the group without TTFB", out.String())
	}
}
