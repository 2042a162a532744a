package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/redistest"
)

func TestTryAcquireOrRead(t *testing.T) {
	rdb := redistest.Client(t)
	l := NewLocker(rdb, Options{TTL: time.Second})
	ctx := context.Background()
	lock, r, n, stream := "corral:v1:{t:h}:l", "corral:v1:{t:h}:r", "corral:v1:{t:h}:n", "corral:v1:{t:h}:s"
	rdb.Set(ctx, stream, "a previous leader's stream", time.Minute)

	// Nothing stored: the lock is taken.
	lease, ok, vals, err := l.TryAcquireOrRead(ctx, lock, []string{r, n}, stream)
	if err != nil || !ok || len(vals) != 2 || vals[0] != nil || vals[1] != nil {
		t.Fatalf("empty: ok=%v vals=%q err=%v; want the lock", ok, vals, err)
	}
	if n, _ := rdb.Exists(ctx, stream).Result(); n != 0 {
		t.Error("taking the lock left the previous holder's stream")
	}
	if tok, _ := l.Holder(ctx, lock); tok == "" {
		t.Error("Holder of a held lock is empty")
	}
	// Held by us: a second caller neither gets it nor sees values.
	if _, ok2, _, err := l.TryAcquireOrRead(ctx, lock, []string{r, n}, stream); ok2 || err != nil {
		t.Fatalf("second caller took a held lock (err %v)", err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// An answer is stored: it is returned and the lock is not taken.
	rdb.Set(ctx, n, "negative", time.Minute)
	_, ok, vals, err = l.TryAcquireOrRead(ctx, lock, []string{r, n}, stream)
	if err != nil || ok || vals[0] != nil || string(vals[1]) != "negative" {
		t.Fatalf("stored: ok=%v vals=%q err=%v; want the value and no lock", ok, vals, err)
	}
	if held, _ := l.Held(ctx, lock); held {
		t.Error("the lock was taken although an answer is stored")
	}
	// No keys to read: a plain acquire.
	lease, ok, _, err = l.TryAcquireOrRead(ctx, lock, nil)
	if err != nil || !ok {
		t.Fatalf("plain: ok=%v err=%v", ok, err)
	}
	_ = lease.Release(ctx)
	if tok, err := l.Holder(ctx, lock); tok != "" || err != nil {
		t.Errorf("Holder after release = %q, %v", tok, err)
	}
}
