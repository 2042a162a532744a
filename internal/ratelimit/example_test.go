package ratelimit_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/ratelimit"
)

func Example() {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	l := ratelimit.NewMemory(ratelimit.MemoryOptions{Now: func() time.Time { return now }})
	key, _ := ratelimit.Key("acme", ratelimit.Requests)
	limit := ratelimit.PerMinute(30)
	ctx := context.Background()

	r, _ := l.AllowN(ctx, key, limit, 30)
	fmt.Println(r.Allowed, r.Remaining, r.ResetAfter)
	r, _ = l.AllowN(ctx, key, limit, 1)
	fmt.Println(r.Allowed, r.Remaining, r.RetryAfter, r.ResetAfter)

	h := http.Header{}
	ratelimit.SetHeaders(h, ratelimit.Requests.Suffix(), r)
	ratelimit.SetRetryAfter(h, r.RetryAfter)
	fmt.Println(h.Get("x-ratelimit-remaining-requests"), h.Get("x-ratelimit-reset-requests"), h.Get("Retry-After"))

	now = now.Add(2 * time.Second)
	r, _ = l.AllowN(ctx, key, limit, 1)
	fmt.Println(r.Allowed, r.Remaining)

	_, err := l.AllowN(ctx, key, limit, 31)
	fmt.Println(err)
	// Output:
	// true 0 1m0s
	// false 0 2s 1m0s
	// 0 1m0s 2
	// true 0
	// ratelimit: request exceeds the burst of the limit
}
