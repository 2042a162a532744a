package spend

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Nanodollars is an amount of money in units of 10⁻⁹ USD.
type Nanodollars int64

// Common amounts.
const (
	Nanodollar  Nanodollars = 1
	Microdollar             = 1000 * Nanodollar
	Cent                    = 10_000_000 * Nanodollar
	Dollar                  = 1_000_000_000 * Nanodollar
)

// String renders n in dollars with as many decimals as it needs and at
// least two: $0.000123, $1.50, -$0.25.
func (n Nanodollars) String() string {
	if n < 0 {
		return "-$" + n.abs(2)
	}
	return "$" + n.abs(2)
}

// USD renders n as a plain decimal number of dollars with no trailing
// zeros ("0.000123", "1.5", "-0.25", "0"), the form of the JSON fields
// *_usd and of the CSV columns.
func (n Nanodollars) USD() string {
	if n < 0 {
		return "-" + n.abs(0)
	}
	return n.abs(0)
}

// abs renders |n| in dollars with at least minFrac decimals.
func (n Nanodollars) abs(minFrac int) string {
	u := uint64(n)
	if n < 0 {
		u = -u // two's complement: right for math.MinInt64 too
	}
	whole, frac := u/uint64(Dollar), u%uint64(Dollar)
	fs := strings.TrimRight(fmt.Sprintf("%09d", frac), "0")
	for len(fs) < minFrac {
		fs += "0"
	}
	s := strconv.FormatUint(whole, 10)
	if fs != "" {
		s += "." + fs
	}
	return s
}

// AppendUSD appends n.USD() to b, without allocating for the string.
func (n Nanodollars) AppendUSD(b []byte) []byte {
	u := uint64(n)
	if n < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/uint64(Dollar), 10)
	frac := u % uint64(Dollar)
	if frac == 0 {
		return b
	}
	var d [9]byte
	for i := 8; i >= 0; i-- {
		d[i] = byte('0' + frac%10)
		frac /= 10
	}
	end := 9
	for d[end-1] == '0' {
		end--
	}
	b = append(b, '.')
	return append(b, d[:end]...)
}

// MarshalJSON renders n as a JSON number of dollars, exactly
// (0.000123), never in a float's rounding.
func (n Nanodollars) MarshalJSON() ([]byte, error) { return []byte(n.USD()), nil }

// UnmarshalJSON reads a JSON number (or a string holding one) of dollars
// with at most nine decimals.
func (n *Nanodollars) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := ParseUSD(s)
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// ErrBadAmount is ParseUSD's error for text that is not an amount it can
// hold exactly.
var ErrBadAmount = errors.New("spend: not an amount of dollars with at most 9 decimals")

// ParseUSD reads a decimal number of dollars ("0.15", "18.75", "-1", "2e-3"
// is refused: amounts are written out) exactly, with at most nine decimals.
func ParseUSD(s string) (Nanodollars, error) {
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" && (!dot || frac == "") || len(frac) > 9 || !digits(whole) || !digits(frac) {
		return 0, ErrBadAmount
	}
	if whole == "" {
		whole = "0"
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > uint64(math.MaxInt64/int64(Dollar)) {
		return 0, ErrBadAmount
	}
	f := uint64(0)
	if frac != "" {
		f, _ = strconv.ParseUint(frac+strings.Repeat("0", 9-len(frac)), 10, 64)
	}
	v := Nanodollars(w)*Dollar + Nanodollars(f)
	if neg {
		v = -v
	}
	return v, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
