package accessline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/spend"
)

// both writes l through the gateway's slog logger and through the Encoder
// and returns the two outputs.
func both(t testing.TB, ctx context.Context, at time.Time, level slog.Level, l Line) (viaSlog, viaEncoder string) {
	t.Helper()
	var a, b bytes.Buffer
	log, _ := New(&a, slog.LevelDebug)
	if err := log.Handler().Handle(ctx, l.Record(at, level)); err != nil {
		t.Fatalf("slog handle: %v", err)
	}
	_, enc := New(&b, slog.LevelDebug)
	if err := enc.Write(ctx, at, level, &l); err != nil {
		t.Fatalf("encoder write: %v", err)
	}
	return a.String(), b.String()
}

func traced(ctx context.Context, tid, sid byte) context.Context {
	var cfg trace.SpanContextConfig
	for i := range cfg.TraceID {
		cfg.TraceID[i] = tid + byte(i)
	}
	for i := range cfg.SpanID {
		cfg.SpanID[i] = sid + byte(i)
	}
	cfg.TraceFlags = trace.FlagsSampled
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(cfg))
}

// awkward strings: everything slog's JSON escaping treats specially.
var awkward = []string{
	"",
	"plain",
	`quote " and backslash \ and both \"`,
	"<script>alert('x')</script> & more",
	"tab\there, newline\n, return\r, nul\x00, bell\x07, esc\x1b, unit sep\x1f, del\x7f",
	"invalid utf-8: \xff \xc3\x28 \xe2\x82 \xf0\x28\x8c\xbc end\x80",
	"line sep \u2028 para sep \u2029 and U+2027 \u2027 U+202A \u202a",
	"non-ascii: héllo wörld 日本語 🦙 \ufffd",
	"/v1/chat/completions?x=1&y=<2>",
	strings.Repeat("long value with \"escapes\" \\ and \u2028 ", 400),
	strings.Repeat("x", 20000), // larger than a pooled buffer
}

var floats = []float64{
	0, math.Copysign(0, -1), 0.001, 0.5, 1, 1.5, 12.345, 1e-6, 9.99e-7, 1e-7, 1.234e-10,
	123456789.123, 1e20, 1e21, 1.5e21, 1e300, math.MaxFloat64, math.SmallestNonzeroFloat64,
	-3.25, -1e-8, -2e22, float64(1234567) / 1000, 0.1 + 0.2,
	math.NaN(), math.Inf(1), math.Inf(-1), // not covered: slog writes an error text
}

// TestEncoderMatchesSlog encodes many lines both ways and requires the
// same bytes: every optional field present and absent, awkward strings in
// every string field, awkward floats, levels, times and zones, with and
// without a span.
func TestEncoderMatchesSlog(t *testing.T) {
	base := Line{
		RequestID: "01JDREQ", Method: "POST", Path: "/v1/chat/completions", Status: 200,
		LatencyMS: 0.412, Bytes: 312,
	}
	full := base
	full.Tenant, full.Endpoint, full.Model, full.Cache = "acme", "chat", "gpt-4o-mini", "MISS"
	full.UpstreamMS, full.Prompt, full.Completion, full.Saved = 812.5, 12, 30, 42
	full.Bypass, full.Code, full.Err = "background", "upstream_error", "upstream: read: connection reset"
	full.CostUSD, full.SavedUSD = 240_000, 1_500_000_000

	ctxs := map[string]context.Context{
		"untraced": context.Background(),
		"traced":   traced(context.Background(), 0xa0, 0x10),
		// A span id without a trace id is not a valid span context:
		// telemetry.LogHandler adds nothing for it.
		"invalid span": trace.ContextWithSpanContext(context.Background(),
			trace.NewSpanContext(trace.SpanContextConfig{SpanID: trace.SpanID{1}})),
	}
	kolkata := time.FixedZone("IST", 5*3600+1800)
	times := []time.Time{
		time.Now(), // with a monotonic reading
		time.Date(2026, 12, 1, 15, 54, 12, 0, time.UTC),
		time.Date(2026, 12, 1, 15, 54, 12, 120000000, time.UTC),
		time.Date(2026, 12, 1, 15, 54, 12, 123456789, kolkata),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.FixedZone("", -7*3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), // not covered
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),    // not covered
	}
	levels := []slog.Level{slog.LevelInfo, slog.LevelDebug, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2, slog.LevelDebug - 3}

	var lines []Line
	// Every subset of the optional fields, from full.
	for mask := 0; mask < 1<<12; mask++ {
		l := base
		set := func(bit int, f func()) {
			if mask&(1<<bit) != 0 {
				f()
			}
		}
		set(0, func() { l.Tenant = full.Tenant })
		set(1, func() { l.Endpoint = full.Endpoint })
		set(2, func() { l.Model = full.Model })
		set(3, func() { l.Cache = full.Cache })
		set(4, func() { l.UpstreamMS = full.UpstreamMS })
		set(5, func() { l.Prompt = full.Prompt })
		set(6, func() { l.Completion, l.Saved = full.Completion, full.Saved })
		set(7, func() { l.Bypass = full.Bypass })
		set(8, func() { l.Err = full.Err })
		set(9, func() { l.CostUSD = full.CostUSD })
		set(10, func() { l.SavedUSD = full.SavedUSD })
		set(11, func() { l.Code = full.Code })
		lines = append(lines, l)
	}
	// Awkward strings in each string field of the full line.
	for _, s := range awkward {
		for i := range 10 {
			l := full
			*[]*string{&l.RequestID, &l.Method, &l.Path, &l.Tenant, &l.Endpoint, &l.Model, &l.Cache, &l.Bypass, &l.Code, &l.Err}[i] = s
			lines = append(lines, l)
		}
	}
	// Awkward floats and integers.
	for _, f := range floats {
		l := full
		l.LatencyMS, l.UpstreamMS = f, f
		lines = append(lines, l)
	}
	for _, n := range []int{0, -1, 1, math.MaxInt, math.MinInt} {
		l := full
		l.Status, l.Bytes, l.Prompt, l.Completion, l.Saved = n, int64(n), n, -n, n
		l.CostUSD, l.SavedUSD = spend.Nanodollars(n), spend.Nanodollars(-n)
		lines = append(lines, l)
	}

	compared := 0
	for name, ctx := range ctxs {
		for i, l := range lines {
			at, level := times[i%len(times)], levels[i%len(levels)]
			viaSlog, viaEncoder := both(t, ctx, at, level, l)
			if viaSlog != viaEncoder {
				t.Fatalf("%s, line %d (%+v) at %v, %v:\nslog:    %q\nencoder: %q", name, i, l, at, level, viaSlog, viaEncoder)
			}
			compared++
		}
		// And every time and level on one line.
		for _, at := range times {
			for _, level := range levels {
				viaSlog, viaEncoder := both(t, ctx, at, level, full)
				if viaSlog != viaEncoder {
					t.Fatalf("%s at %v, %v:\nslog:    %q\nencoder: %q", name, at, level, viaSlog, viaEncoder)
				}
				compared++
			}
		}
	}
	// The test means something only if the lines took the fast path
	// and carried the trace.
	viaSlog, _ := both(t, ctxs["traced"], times[1], slog.LevelInfo, full)
	want := `{"time":"2026-12-01T15:54:12Z","level":"INFO","msg":"request","request_id":"01JDREQ","method":"POST","path":"/v1/chat/completions","status":200,"latency_ms":0.412,"bytes":312,"tenant":"acme","endpoint":"chat","model":"gpt-4o-mini","cache":"MISS","upstream_ms":812.5,"prompt_tokens":12,"completion_tokens":30,"saved_tokens":42,"cost_usd":0.00024,"saved_usd":1.5,"bypass_reason":"background","code":"upstream_error","error":"upstream: read: connection reset","trace_id":"a0a1a2a3a4a5a6a7a8a9aaabacadaeaf","span_id":"1011121314151617"}` + "\n"
	if viaSlog != want {
		t.Fatalf("slog line:\n got %q\nwant %q", viaSlog, want)
	}
	t.Logf("%d lines compared", compared)
}

// TestAppendStringEveryPosition puts each kind of byte the escaping
// treats specially at every position of strings of every length around
// the eight-byte scan's word boundaries.
func TestAppendStringEveryPosition(t *testing.T) {
	for n := range 26 {
		for pos := range n {
			for _, special := range []string{`"`, `\`, "\n", "\x01", "\x7f", "\x80", "é", "\u2028", "<"} {
				s := strings.Repeat("a", pos) + special + strings.Repeat("b", n-pos-1)
				l := Line{Path: s, RequestID: s[:pos]}
				viaSlog, viaEncoder := both(t, context.Background(), time.Unix(0, 0).UTC(), slog.LevelInfo, l)
				if viaSlog != viaEncoder {
					t.Fatalf("%q:\nslog:    %q\nencoder: %q", s, viaSlog, viaEncoder)
				}
			}
		}
	}
}

// TestEncoderFallback checks that the lines the encoder does not cover
// (where slog writes its error text) come out as slog writes them, and
// that covered ones carry no error text.
func TestEncoderFallback(t *testing.T) {
	for _, tt := range []struct {
		give Line
		at   time.Time
		want bool // covered: no error text
	}{
		{Line{LatencyMS: 1}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{Line{LatencyMS: math.NaN()}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{Line{UpstreamMS: math.Inf(1)}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{Line{}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{Line{}, time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC), false},
	} {
		viaSlog, viaEncoder := both(t, context.Background(), tt.at, slog.LevelInfo, tt.give)
		if viaSlog != viaEncoder || strings.Contains(viaEncoder, "!ERROR:") == tt.want {
			t.Errorf("line %+v at %v: slog %q, encoder %q; want the same, error text %v", tt.give, tt.at, viaSlog, viaEncoder, !tt.want)
		}
	}
}

// TestAppendFloat compares the encoder's floats with encoding/json's
// (slog's JSON handler marshals floats with it) on latencies, which take
// the decimal shortcut, and on values around and past its bounds.
func TestAppendFloat(t *testing.T) {
	check := func(f float64) {
		t.Helper()
		if !finite(f) {
			return // not covered (TestEncoderFallback)
		}
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendFloat(nil, f); string(got) != string(want) {
			t.Fatalf("appendFloat(%v) = %s, want %s", f, got, want)
		}
	}
	for n := int64(0); n < 300000; n++ {
		check(float64(n) / 1000)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		n := rng.Int64N(2e15)
		check(float64(n) / 1000)
		check(float64(n) / 1e6)
		check(math.Float64frombits(rng.Uint64()&^(0x7ff<<52) | uint64(rng.IntN(0x7ff))<<52)) // finite, any exponent
	}
	for _, f := range floats[:len(floats)-3] {
		check(f)
		check(math.Nextafter(f, math.Inf(1)))
		check(math.Nextafter(f, math.Inf(-1)))
	}
}

// TestAppendInt compares the encoder's integers with strconv's.
func TestAppendInt(t *testing.T) {
	check := func(n int64) {
		t.Helper()
		if got, want := string(appendInt(nil, n)), strconv.FormatInt(n, 10); got != want {
			t.Fatalf("appendInt(%d) = %s, want %s", n, got, want)
		}
	}
	for n := int64(-1000); n < 100000; n++ {
		check(n)
	}
	for _, n := range []int64{1e12 - 1, 1e12, 1e12 + 1, math.MaxInt64, math.MinInt64} {
		check(n)
	}
}

// TestAppendTime compares the encoder's times with time.RFC3339Nano
// across the covered years, zones and fractions.
func TestAppendTime(t *testing.T) {
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("", 0), time.FixedZone("", 5*3600+1800),
		time.FixedZone("", -(9*3600 + 59*60 + 59)), time.FixedZone("", 14*3600), time.FixedZone("", -1)}
	rng := rand.New(rand.NewPCG(3, 4))
	lo := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix() - 86400
	hi := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).Unix() + 86400
	for i := range 300000 {
		at := time.Unix(lo+rng.Int64N(hi-lo), int64(rng.IntN(1e9))/int64([]int{1, 1e3, 1e6, 1e9}[i%4])).In(zones[i%len(zones)])
		want := at.Format(time.RFC3339Nano)
		got, ok := appendTime(nil, at)
		if y := at.Year(); ok != (y >= 0 && y < 10000) || ok && string(got) != want {
			t.Fatalf("appendTime(%s) = %q, %v; want %q", want, got, ok, want)
		}
	}
	// Lines of one second share its formatted text: walk across a few
	// seconds (and a day, a year and a zone change) in small steps.
	start := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	for i := range 40000 {
		at := start.Add(time.Duration(i) * 97 * time.Microsecond).In(zones[i/5000%len(zones)])
		want := at.Format(time.RFC3339Nano)
		if got, ok := appendTime(nil, at); !ok || string(got) != want {
			t.Fatalf("appendTime(%s) = %q, %v", want, got, ok)
		}
	}
}

// TestEncoderOneWrite checks a line is handed to the writer in one Write
// (the log sink requires whole lines) and the pooled buffer is not reused
// under a writer that keeps it until it returns.
func TestEncoderOneWrite(t *testing.T) {
	var w countingWriter
	_, enc := New(&w, slog.LevelInfo)
	for i := range 3 {
		l := Line{RequestID: fmt.Sprint(i), Err: awkward[len(awkward)-1-i%2]}
		if err := enc.Write(context.Background(), time.Now(), slog.LevelInfo, &l); err != nil {
			t.Fatal(err)
		}
	}
	if len(w.writes) != 3 {
		t.Fatalf("%d writes for 3 lines, want 3", len(w.writes))
	}
	for i, p := range w.writes {
		if !strings.HasSuffix(p, "}\n") || strings.Count(p, "\n") != 1 || !strings.Contains(p, fmt.Sprintf(`"request_id":"%d"`, i)) {
			t.Errorf("write %d is not line %d whole: %.80q...", i, i, p)
		}
	}
}

type countingWriter struct{ writes []string }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// FuzzEncoder is the differential test on arbitrary strings and numbers:
// go test -fuzz FuzzEncoder ./internal/accessline/
func FuzzEncoder(f *testing.F) {
	for _, s := range awkward[:9] {
		f.Add(s, s, 1.5, int64(3), true)
	}
	f.Add("\xed\xa0\x80", "\u2028\u2029", 1e-7, int64(-1), false)
	f.Fuzz(func(t *testing.T, s1, s2 string, fl float64, n int64, tracedCtx bool) {
		l := Line{
			RequestID: s1, Method: s2, Path: s1 + s2, Status: int(n), LatencyMS: fl, Bytes: n,
			Tenant: s2, Endpoint: s1, Model: s2, Cache: s1, UpstreamMS: -fl,
			Prompt: int(n), Completion: int(n >> 1), Saved: int(-n), Bypass: s2, Code: s2, Err: s1,
			CostUSD: spend.Nanodollars(n), SavedUSD: spend.Nanodollars(n >> 3),
		}
		ctx := context.Background()
		if tracedCtx {
			ctx = traced(ctx, byte(n), byte(n>>8)|1)
		}
		at := time.Unix(n%(1<<40), n%1e9).In(time.FixedZone("", int(n%(14*3600))))
		viaSlog, viaEncoder := both(t, ctx, at, slog.Level(n%16), l)
		if viaSlog != viaEncoder {
			t.Fatalf("slog:    %q\nencoder: %q", viaSlog, viaEncoder)
		}
	})
}
