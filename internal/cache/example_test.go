package cache_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/cache"
)

func ExampleMemory() {
	ctx := context.Background()
	store := cache.NewMemory(cache.MemoryOptions{MaxBytes: 64 << 20})
	defer store.Close()

	upstream := http.Header{
		"Content-Type":   {"application/json"},
		"X-Request-Id":   {"req_abc"},
		"Set-Cookie":     {"__cf_bm=secret"},
		"Openai-Version": {"2020-10-01"},
	}
	key := "corral:v1:{acme:" + fmt.Sprintf("%064x", 42) + "}:r"
	err := store.Set(ctx, key, &cache.Entry{
		Status:       200,
		Header:       cache.KeepHeaders(upstream),
		Body:         []byte(`{"object":"chat.completion"}`),
		PromptTokens: 9,
	}, time.Hour)
	if err != nil {
		fmt.Println("set:", err)
		return
	}

	e, err := store.Get(ctx, key)
	if err != nil {
		fmt.Println("get:", err)
		return
	}
	fmt.Println(e.Status, string(e.Body), len(e.Header), e.TTL)

	n, _ := store.DeletePattern(ctx, "corral:v1:{acme:*")
	_, err = store.Get(ctx, key)
	fmt.Println(n, errors.Is(err, cache.ErrNotFound))
	// Output:
	// 200 {"object":"chat.completion"} 2 1h0m0s
	// 1 true
}
