package keying

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// MaxExponentDigits is the longest exponent a number may have, leading
// zeros aside: |E| < 10^18, so every exponent and every sum with the body's
// length fits an int64 and a number is canonicalised in time linear in its
// length. No real request comes near it (float64 ends at 1e308); a longer
// exponent would need arbitrary-precision arithmetic whose cost is
// quadratic in the exponent's length, which one hostile request could turn
// into minutes of CPU.
const MaxExponentDigits = 18

// ErrNumberOutOfRange reports a number whose exponent has more than
// MaxExponentDigits digits. Errors that wrap it also wrap ErrInvalidJSON.
var ErrNumberOutOfRange = errors.New("number out of range")

// number reads the JSON number at c.pos and writes its canonical form.
//
// The value is normalised on the digit string: the integer and fraction
// digits become one significand D with leading and trailing zeros removed,
// and the exponent E absorbs the fraction length and the trailing zeros, so
// value = ±D×10^E exactly. Going through float64 instead would merge
// integers above 2^53 (seeds) and decimals that round alike.
func (c *canon) number() error {
	in := c.in
	i := c.pos
	neg := in[i] == '-'
	if neg {
		i++
	}
	intStart := i
	switch {
	case i == len(in):
		return c.failEOF()
	case in[i] == '0':
		i++
	case in[i] >= '1' && in[i] <= '9':
		for i < len(in) && isDigit(in[i]) {
			i++
		}
	default:
		c.pos = i
		return c.fail("invalid number")
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(in) && in[i] == '.' {
		i++
		fracStart = i
		for i < len(in) && isDigit(in[i]) {
			i++
		}
		if i == fracStart {
			c.pos = i
			if i == len(in) {
				return c.failEOF()
			}
			return c.fail("invalid number: no digits after '.'")
		}
		fracEnd = i
	}
	expNeg := false
	expStart, expEnd := i, i
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			expNeg = in[i] == '-'
			i++
		}
		expStart = i
		for i < len(in) && isDigit(in[i]) {
			i++
		}
		if i == expStart {
			c.pos = i
			if i == len(in) {
				return c.failEOF()
			}
			return c.fail("invalid number: no digits in exponent")
		}
		expEnd = i
	}
	c.pos = i
	c.kind = kindNumber

	exp := in[expStart:expEnd]
	for len(exp) > 0 && exp[0] == '0' {
		exp = exp[1:]
	}
	if len(exp) > MaxExponentDigits {
		// Refused rather than computed: exact arithmetic on such an
		// exponent costs time quadratic in its length (see MaxExponentDigits).
		return fmt.Errorf("keying: %w: %w: an exponent of more than %d digits before offset %d",
			ErrInvalidJSON, ErrNumberOutOfRange, MaxExponentDigits, c.pos)
	}

	d := append(append(c.num[:0], in[intStart:intEnd]...), in[fracStart:fracEnd]...)
	c.num = d
	lead := 0
	for lead < len(d) && d[lead] == '0' {
		lead++
	}
	if lead == len(d) {
		c.out = append(c.out, '0') // every zero, including -0 and 0e9
		c.intVal, c.intOK = 0, true
		return nil
	}
	end := len(d)
	for d[end-1] == '0' {
		end--
	}
	digits := d[lead:end]
	// adj ≤ len(body), far from overflowing int64 when added to an
	// exponent below 10^18.
	adj := int64(len(d)-end) - int64(fracEnd-fracStart)

	var e int64
	for _, b := range exp {
		e = e*10 + int64(b-'0')
	}
	if expNeg {
		e = -e
	}
	e += adj
	c.out = appendDecimal(c.out, neg, digits, e)
	c.intVal, c.intOK = toInt(neg, digits, e)
	return nil
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// appendDecimal appends ±d×10^e in canonical form. d is non-empty and has
// no leading or trailing zeros. With k = len(d) and n = k+e (the position
// of the decimal point, as in ECMAScript's Number::toString):
//
//	e ≥ 0 and e ≤ 21    d followed by e zeros            100, 12345678901234567890123
//	e < 0 and n > 0     d with a point after n digits    1.25
//	e < 0 and n > -6    "0." then -n zeros then d        0.000001
//	otherwise           d[0] "." d[1:] "e" n-1           1.5e30, 1e-7
//
// Each value has exactly one (d, e), so each value has exactly one text,
// and reading the text back gives the same (d, e).
func appendDecimal(dst []byte, neg bool, d []byte, e int64) []byte {
	if neg {
		dst = append(dst, '-')
	}
	k := int64(len(d))
	n := k + e
	switch {
	case e >= 0 && e <= 21:
		dst = append(dst, d...)
		for ; e > 0; e-- {
			dst = append(dst, '0')
		}
	case e < 0 && n > 0:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case e < 0 && n > -6:
		dst = append(dst, '0', '.')
		for ; n < 0; n++ {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = appendSignificand(dst, d)
		dst = strconv.AppendInt(dst, n-1, 10)
	}
	return dst
}

func appendSignificand(dst, d []byte) []byte {
	dst = append(dst, d[0])
	if len(d) > 1 {
		dst = append(dst, '.')
		dst = append(dst, d[1:]...)
	}
	return append(dst, 'e')
}

// toInt converts ±d×10^e to an int when it is a non-negative integer that
// fits.
func toInt(neg bool, d []byte, e int64) (int, bool) {
	if neg || e < 0 || int64(len(d))+e > 18 {
		return 0, false
	}
	var v int64
	for _, b := range d {
		v = v*10 + int64(b-'0')
	}
	for ; e > 0; e-- {
		v *= 10
	}
	if v > math.MaxInt {
		return 0, false
	}
	return int(v), true
}
