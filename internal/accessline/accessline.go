// Package accessline is the gateway's access log line (one per request:
// its fields and their order) and an encoder that writes it without
// log/slog, byte for byte what the gateway's slog logger would write.
//
// Why: at the default level every request writes this line, and
// slog.JSONHandler spent about 17,000 instructions on it, close to half of
// a memory hit's own cost (docs/benchmarks.md, issue 20): a Record and its
// attribute walk, ReplaceAttr on every attribute, the level through
// encoding/json, every key escaped, floats through encoding/json. The
// line's shape is fixed, so its keys are constants and the encoder only
// escapes the values.
//
// The encoder is only right for the logger New builds with it (the
// gateway's: JSON, durations as text, trace_id and span_id from the
// context's span), so the two come from one call and the server is handed
// both; any other logger keeps the slog path (Line.Record). Lines the
// encoder does not cover exactly (a float that is NaN or infinite, a time
// outside years 0–9999, where slog writes an error text) go to the
// logger's handler. A differential test and a fuzz target compare the two
// encodings on the same lines.
package accessline

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/jsonstr"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/telemetry"
)

// Message is the msg of every access line.
const Message = "request"

// Line is one access log line's content. Optional fields are left out of
// the line when empty (strings) or not positive (numbers), as documented
// on each; the order below is the order in the line.
type Line struct {
	RequestID string
	Method    string
	Path      string
	Status    int
	LatencyMS float64
	Bytes     int64
	Tenant    string // optional
	Endpoint  string // optional: the model endpoint, or "proxy"
	Model     string // optional
	Cache     string // optional
	// UpstreamMS is logged when positive.
	UpstreamMS float64
	// Prompt and Completion are logged, both, when their sum is positive.
	Prompt     int
	Completion int
	Saved      int // logged when positive
	// CostUSD is what this request's upstream call cost, SavedUSD what a
	// HIT, STALE or COALESCED answer saved; each logged, as an exact
	// decimal number of dollars, when positive.
	CostUSD  spend.Nanodollars
	SavedUSD spend.Nanodollars
	Bypass   string // optional, logged as bypass_reason
	// Code is optional: the error code of an answer Corral refused or
	// failed itself (invalid_api_key, rate_limit_exceeded, ...), so every
	// refusal's line says which one it was.
	Code string
	Err  string // optional, logged as error
}

// Attrs appends the line's attributes, in the line's order, to dst.
func (l *Line) Attrs(dst []slog.Attr) []slog.Attr {
	dst = append(dst,
		slog.String("request_id", l.RequestID),
		slog.String("method", l.Method),
		slog.String("path", l.Path),
		slog.Int("status", l.Status),
		slog.Float64("latency_ms", l.LatencyMS),
		slog.Int64("bytes", l.Bytes),
	)
	if l.Tenant != "" {
		dst = append(dst, slog.String("tenant", l.Tenant))
	}
	if l.Endpoint != "" {
		dst = append(dst, slog.String("endpoint", l.Endpoint))
	}
	if l.Model != "" {
		dst = append(dst, slog.String("model", l.Model))
	}
	if l.Cache != "" {
		dst = append(dst, slog.String("cache", l.Cache))
	}
	if l.UpstreamMS > 0 {
		dst = append(dst, slog.Float64("upstream_ms", l.UpstreamMS))
	}
	if l.Prompt+l.Completion > 0 {
		dst = append(dst, slog.Int("prompt_tokens", l.Prompt), slog.Int("completion_tokens", l.Completion))
	}
	if l.Saved > 0 {
		dst = append(dst, slog.Int("saved_tokens", l.Saved))
	}
	if l.CostUSD > 0 {
		dst = append(dst, slog.Any("cost_usd", l.CostUSD)) // its MarshalJSON: exact, never a float
	}
	if l.SavedUSD > 0 {
		dst = append(dst, slog.Any("saved_usd", l.SavedUSD))
	}
	if l.Bypass != "" {
		dst = append(dst, slog.String("bypass_reason", l.Bypass))
	}
	if l.Code != "" {
		dst = append(dst, slog.String("code", l.Code))
	}
	if l.Err != "" {
		dst = append(dst, slog.String("error", l.Err))
	}
	return dst
}

// Record is the line as a slog record at time t and level, for any
// slog.Handler.
func (l *Line) Record(t time.Time, level slog.Level) slog.Record {
	var buf [18]slog.Attr
	r := slog.NewRecord(t, level, Message, 0)
	r.AddAttrs(l.Attrs(buf[:0])...)
	return r
}

// New returns the gateway's logger, writing one JSON object per line to w
// at level and up (durations as text, trace_id and span_id on lines
// logged with a traced context), and the Encoder that writes access lines
// exactly as that logger would.
func New(w io.Writer, level slog.Leveler) (*slog.Logger, *Encoder) {
	h := telemetry.LogHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}))
	return slog.New(h), &Encoder{w: w, h: h}
}

// durationText logs durations as operators write them ("30s", "1m30s"),
// not as slog's JSON default of integer nanoseconds. No access line field
// is a duration, so the Encoder needs nothing of it.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// Encoder writes access lines to the writer of the logger New returned
// with it, in one Write each, without going through slog. It does not
// check the level: the caller asks the logger (Enabled) first, as for any
// line. Safe for concurrent use if the writer is (slog's handler holds a
// mutex around its Write; Encoder does not, so the writer must be safe
// on its own, as logsink.Sink is).
type Encoder struct {
	w io.Writer
	h slog.Handler // the logger's, for lines the encoder does not cover
}

// bufs holds line buffers; a line is about 300 bytes.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooled keeps a rare huge line (a long error text) from pinning its
// buffer in the pool.
const maxPooled = 16 << 10

// Write writes l at time t and level, with the trace of ctx's span if it
// has one, and returns the writer's error.
func (e *Encoder) Write(ctx context.Context, t time.Time, level slog.Level, l *Line) error {
	if !covered(l) {
		return e.h.Handle(ctx, l.Record(t, level))
	}
	bp := bufs.Get().(*[]byte)
	b, ok := Append((*bp)[:0], t, level, l, trace.SpanContextFromContext(ctx))
	if !ok {
		bufs.Put(bp)
		return e.h.Handle(ctx, l.Record(t, level))
	}
	_, err := e.w.Write(b)
	if cap(b) <= maxPooled {
		*bp = b[:0]
		bufs.Put(bp)
	}
	return err
}

// covered reports whether Append writes what slog would for this line's
// fields: slog writes an error text in place of a NaN or infinite float.
// (Append itself refuses a time slog would not write as is.)
func covered(l *Line) bool {
	return finite(l.LatencyMS) && finite(l.UpstreamMS)
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Append appends the line as the gateway's logger writes it, newline
// included: time, level, msg, the line's fields, then trace_id and span_id
// when sc is valid. The caller has checked the line is covered. It
// reports false, and b is not a line, for a time whose year has not four
// digits, which slog follows with an error text.
func Append(b []byte, t time.Time, level slog.Level, l *Line, sc trace.SpanContext) ([]byte, bool) {
	b = append(b, `{"time":"`...)
	b, ok := appendTime(b, t)
	if !ok {
		return b, false
	}
	b = append(b, `","level":"`...)
	b = append(b, level.String()...) // upper-case letters, digits, + and -: nothing to escape
	b = append(b, `","msg":"`+Message+`","request_id":"`...)
	b = jsonstr.AppendTail(b, l.RequestID)
	b = append(b, `,"method":"`...)
	b = jsonstr.AppendTail(b, l.Method)
	b = append(b, `,"path":"`...)
	b = jsonstr.AppendTail(b, l.Path)
	b = append(b, `,"status":`...)
	b = appendInt(b, int64(l.Status))
	b = append(b, `,"latency_ms":`...)
	b = appendFloat(b, l.LatencyMS)
	b = append(b, `,"bytes":`...)
	b = appendInt(b, l.Bytes)
	if l.Tenant != "" {
		b = append(b, `,"tenant":"`...)
		b = jsonstr.AppendTail(b, l.Tenant)
	}
	if l.Endpoint != "" {
		b = append(b, `,"endpoint":"`...)
		b = jsonstr.AppendTail(b, l.Endpoint)
	}
	if l.Model != "" {
		b = append(b, `,"model":"`...)
		b = jsonstr.AppendTail(b, l.Model)
	}
	if l.Cache != "" {
		b = append(b, `,"cache":"`...)
		b = jsonstr.AppendTail(b, l.Cache)
	}
	if l.UpstreamMS > 0 {
		b = append(b, `,"upstream_ms":`...)
		b = appendFloat(b, l.UpstreamMS)
	}
	if l.Prompt+l.Completion > 0 {
		b = append(b, `,"prompt_tokens":`...)
		b = appendInt(b, int64(l.Prompt))
		b = append(b, `,"completion_tokens":`...)
		b = appendInt(b, int64(l.Completion))
	}
	if l.Saved > 0 {
		b = append(b, `,"saved_tokens":`...)
		b = appendInt(b, int64(l.Saved))
	}
	if l.CostUSD > 0 {
		b = append(b, `,"cost_usd":`...)
		b = l.CostUSD.AppendUSD(b)
	}
	if l.SavedUSD > 0 {
		b = append(b, `,"saved_usd":`...)
		b = l.SavedUSD.AppendUSD(b)
	}
	if l.Bypass != "" {
		b = append(b, `,"bypass_reason":"`...)
		b = jsonstr.AppendTail(b, l.Bypass)
	}
	if l.Code != "" {
		b = append(b, `,"code":"`...)
		b = jsonstr.AppendTail(b, l.Code)
	}
	if l.Err != "" {
		b = append(b, `,"error":"`...)
		b = jsonstr.AppendTail(b, l.Err)
	}
	if sc.IsValid() { // as telemetry.LogHandler decides
		tid, sid := sc.TraceID(), sc.SpanID()
		b = append(b, `,"trace_id":"`...)
		b = hex.AppendEncode(b, tid[:])
		b = append(b, `","span_id":"`...)
		b = hex.AppendEncode(b, sid[:])
		b = append(b, '"')
	}
	return append(b, "}\n"...), true
}

// appendTime writes t as time.RFC3339Nano does (slog's JSON handler
// formats the record's time with it): the date and clock in t's zone, the
// nanoseconds with trailing zeros trimmed (none when zero), then Z for a
// zero offset or ±hh:mm (seconds of an offset dropped). The date and clock
// to the second are formatted once a second (lastSecond) and copied in
// between. It reports false for a year outside 0–9999.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	_, offset := t.Zone()
	local := t.Unix() + int64(offset) // seconds since 1970 on t's wall clock
	sec := lastSecond.Load()
	if sec == nil || sec.local != local {
		sec = &second{local: local}
		if !formatSecond(&sec.text, local) {
			return b, false
		}
		lastSecond.Store(sec)
	}
	b = append(b, sec.text[:]...)
	if ns := t.Nanosecond(); ns != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i := 9; i > 0; i-- {
			frac[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(frac)
		for frac[n-1] == '0' {
			n--
		}
		b = append(b, frac[:n]...)
	}
	if offset == 0 {
		return append(b, 'Z'), true
	}
	zone := offset / 60 // minutes, truncated as time does
	if zone < 0 {
		b = append(b, '-')
		zone = -zone
	} else {
		b = append(b, '+')
	}
	b = append2(b, zone/60)
	b = append(b, ':')
	return append2(b, zone%60), true
}

// second is one wall-clock second formatted as "2006-01-02T15:04:05".
type second struct {
	local int64 // Unix seconds plus the zone's offset
	text  [19]byte
}

// lastSecond is the second the last line was written in: lines of the
// same second share its text. A second seen again after another is
// formatted again; two zones alternating only cost the formatting.
var lastSecond atomic.Pointer[second]

// formatSecond writes the wall-clock second local (Unix seconds plus the
// zone's offset) into text, computing the civil date from the day number
// (H. Hinnant's civil_from_days). It reports false for a year outside
// 0–9999, which RFC 3339 cannot write in four digits.
func formatSecond(text *[19]byte, local int64) bool {
	days, sod := local/86400, local%86400
	if sod < 0 {
		days, sod = days-1, sod+86400
	}
	z := days + 719468 // days since 0000-03-01
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097                                  // day of the 400-year era, [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of the era, [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of the year from March 1, [0, 365]
	mp := (5*doy + 2) / 153                                // month from March, [0, 11]
	day := doy - (153*mp+2)/5 + 1
	month := mp + 3
	if mp >= 10 {
		month = mp - 9
	}
	year := yoe + era*400
	if month <= 2 {
		year++
	}
	if year < 0 || year >= 10000 {
		return false
	}
	b := append(text[:0], byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-')
	b = append2(b, int(month))
	b = append(b, '-')
	b = append2(b, int(day))
	b = append(b, 'T')
	b = append2(b, int(sod/3600))
	b = append(b, ':')
	b = append2(b, int(sod/60%60))
	b = append(b, ':')
	_ = append2(b, int(sod%60))
	return true
}

// append2 writes n ≥ 0 in at least two digits.
func append2(b []byte, n int) []byte {
	if n < 100 {
		return append(b, byte('0'+n/10), byte('0'+n%10))
	}
	return strconv.AppendInt(b, int64(n), 10)
}

// appendFloat writes f as encoding/json does (which slog's JSON handler
// calls for floats): the shortest decimal that reads back as f, in
// exponent form only below 1e-6 or from 1e21, with a one-digit negative
// exponent unpadded (1e-7, not 1e-07). f is finite.
func appendFloat(b []byte, f float64) []byte {
	// Latencies are whole microseconds over 1000. For f = n/1000 with
	// 0 <= n < 1e15, the decimal n/1000 is the shortest that reads back as
	// f: a decimal with fewer significant digits lies at least 1e-15·f
	// away, farther than f's neighbours (1.1e-16·f), so strconv would find
	// the same digits; written directly they cost a tenth.
	// (The check m/1000 == f is what makes it right; m is only a guess.)
	if f >= 0 && f < 1e12 && !math.Signbit(f) { // not -0, written "-0"
		if m := int64(f*1000 + 0.5); float64(m)/1000 == f {
			return appendMilli(b, m)
		}
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendInt writes n in decimal as strconv.AppendInt does, without its
// general path for the small numbers of a line (statuses, sizes, tokens).
func appendInt(b []byte, n int64) []byte {
	if n < 0 || n >= 1e12 {
		return strconv.AppendInt(b, n, 10)
	}
	var d [12]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(b, d[i:]...)
}

// appendMilli writes n/1000 in decimal with trailing zeros trimmed (and
// no point when there is no fraction), as 'f' formatting does.
func appendMilli(b []byte, n int64) []byte {
	b = appendInt(b, n/1000)
	frac := n % 1000
	if frac == 0 {
		return b
	}
	d := [4]byte{'.', byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	k := 4
	for d[k-1] == '0' {
		k--
	}
	return append(b, d[:k]...)
}
