package console

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Numbers for people: the console shows $1,234.56, 93.4 %, 1.2k, and
// keeps the exact figure in a data attribute and a tooltip.

// Dollars renders an amount of nano-dollars: two decimals with thousands
// separators ($1,234.56); an amount under a cent that is not zero keeps
// the digits it needs, up to six decimals ($0.000123), so a small test
// bill does not read as nothing.
func Dollars(nanos int64) string {
	neg := nanos < 0
	u := uint64(nanos)
	if neg {
		u = -u
	}
	sign := ""
	if neg {
		sign = "-"
	}
	const cent, dollar = 10_000_000, 1_000_000_000
	if u != 0 && u < cent {
		// Round to a micro-dollar (six decimals), trimming zeros.
		micros := (u + 500) / 1000
		if micros == 0 {
			return sign + "<$0.000001"
		}
		fs := strings.TrimRight(strconv.FormatUint(1_000_000+micros, 10)[1:], "0")
		if len(fs) < 2 {
			fs += strings.Repeat("0", 2-len(fs))
		}
		return sign + "$0." + fs
	}
	cents := (u + cent/2) / cent
	return sign + "$" + Group(int64(cents/100)) + "." + strconv.FormatUint(100+cents%100, 10)[1:]
}

// Group renders n with thousands separators: 1234567 → 1,234,567.
func Group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Count renders a count compactly: 999, 1.2k, 12.3k, 123k, 1.2M, 3.4B.
func Count(n int64) string {
	if n < 0 {
		if n == math.MinInt64 { // -n overflows back to itself: endless recursion
			n++
		}
		return "-" + Count(-n)
	}
	if n < 1000 {
		return strconv.FormatInt(n, 10)
	}
	units := []string{"k", "M", "B", "T"}
	v := float64(n)
	for i, u := range units {
		v /= 1000
		if v < 999.5 || i == len(units)-1 {
			if v >= 100 {
				return strconv.FormatFloat(v, 'f', 0, 64) + u
			}
			return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + u
		}
	}
	return strconv.FormatInt(n, 10)
}

// Percent renders part of whole with one decimal: 93.4 %; "–" when
// whole is 0 (no rate to speak of).
func Percent(part, whole int64) string {
	if whole <= 0 {
		return "–"
	}
	return strconv.FormatFloat(float64(part)*100/float64(whole), 'f', 1, 64) + " %"
}

// Millis renders a latency: 12 ms, 1.2 s; "–" for none.
func Millis(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Second:
		return strconv.FormatInt(d.Round(time.Millisecond).Milliseconds(), 10) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
}
