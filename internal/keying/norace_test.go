//go:build !race

package keying

const raceEnabled = false
