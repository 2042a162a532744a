package config

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes that parses "65536", "64KiB", "8MiB", "1GiB"
// (binary units) and "64KB", "8MB" (decimal units).
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{
	// Longest suffixes first so "KiB" is not read as "B".
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

// UnmarshalText parses a size; it is what env and YAML decoding call.
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.ToLower(strings.TrimSpace(string(text)))
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			s = strings.TrimSpace(strings.TrimSuffix(s, u.suffix))
			mult = u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("not a size (use bytes such as 65536 or a unit such as 64KiB, 8MiB)")
	}
	if n > (1<<62)/mult {
		return fmt.Errorf("size too large")
	}
	*b = ByteSize(n * mult)
	return nil
}

// String renders the size in bytes.
func (b ByteSize) String() string { return strconv.FormatInt(int64(b), 10) }
