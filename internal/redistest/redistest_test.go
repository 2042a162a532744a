package redistest_test

import (
	"context"
	"testing"

	"github.com/corralhq/corral/internal/redistest"
)

func TestStartStopRestart(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	if !srv.Stoppable() {
		t.Skip("external server")
	}
	srv.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("ping after Stop succeeded; want an error")
	}
	srv.Restart()
	if got, err := c.Get(ctx, "k").Result(); err == nil {
		t.Fatalf("get after restart = %q; want a fresh, empty server", got)
	}
}
