package redistest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestStartCluster(t *testing.T) {
	c := StartCluster(t, 3, 1)
	cc := c.Client()
	ctx := context.Background()
	var masters atomic.Int32
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { masters.Add(1); return nil }); err != nil {
		t.Fatal(err)
	}
	nodes, err := cc.ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if masters.Load() != 3 || strings.Count(nodes, "slave") != 3 {
		t.Errorf("masters %d; want 3 masters and 3 replicas in\n%s", masters.Load(), nodes)
	}
	// Keys in different slots land on different masters and are all readable.
	for _, k := range []string{"{a}x", "{b}x", "{c}x", "{d}x"} {
		if err := cc.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	if n, err := cc.Exists(ctx, "{a}x").Result(); err != nil || n != 1 {
		t.Errorf("EXISTS = %d, %v", n, err)
	}
}

func TestStartSentinel(t *testing.T) {
	s := StartSentinel(t, 1)
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.sentinels})
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Failover()
	if err := c.Set(ctx, "k2", "v", 0).Err(); err != nil {
		t.Errorf("SET after the failover: %v", err)
	}
}
