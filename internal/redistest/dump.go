package redistest

import (
	"context"
	"fmt"
	"strings"
)

// Dump is every key of the server with its value as stored, as text, for
// tests that scan all Redis holds for what must never be in it (a
// credential, a prompt). It fails the test on a read error or a key of a
// type it cannot read, so a dump is never silently partial.
func (s *Server) Dump() string {
	s.tb.Helper()
	ctx := context.Background()
	c := s.Client()
	var b strings.Builder
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		var v any
		var err error
		// Each value as it is stored: DUMP's serialisation compresses.
		switch typ, _ := c.Type(ctx, k).Result(); typ {
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = c.SMembers(ctx, k).Result()
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "stream":
			v, err = c.XRange(ctx, k, "-", "+").Result()
		case "none":
			continue // gone since the scan saw it
		default:
			s.tb.Fatalf("redistest: key %s of type %s", k, typ)
		}
		if err != nil {
			s.tb.Fatalf("redistest: read %s: %v", k, err)
		}
		fmt.Fprintf(&b, "%s\n%v\n", k, v)
	}
	if err := iter.Err(); err != nil {
		s.tb.Fatalf("redistest: scan: %v", err)
	}
	return b.String()
}
