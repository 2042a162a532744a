package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a real local Redis Cluster owned by a test: every master and
// replica its own redis-server process on free loopback ports, joined with
// `redis-cli --cluster create`.
type Cluster struct {
	tb    testing.TB
	addrs []string    // host:port of every node, masters first as created
	cmds  []*exec.Cmd // the node processes
}

// StartCluster starts masters masters with replicas replicas each and waits
// until every node reports the cluster ok; the processes are killed at
// cleanup. It skips or fails like Start when redis-server (or redis-cli)
// is not installed.
func StartCluster(tb testing.TB, masters, replicas int) *Cluster {
	tb.Helper()
	if masters < 3 {
		tb.Fatalf("redistest: a Redis Cluster needs at least 3 masters, not %d", masters)
	}
	bin, err := exec.LookPath("redis-server")
	cli, cerr := exec.LookPath("redis-cli")
	if err != nil || cerr != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("redistest: redis-server and redis-cli must be on PATH in CI")
		}
		tb.Skip("redistest: redis-server or redis-cli not installed")
	}
	dir := tb.TempDir()
	c := &Cluster{tb: tb}
	tb.Cleanup(c.stop)
	for i := range masters * (1 + replicas) {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("redistest: free port: %v", err)
		}
		bus, err := freePort()
		if err != nil {
			tb.Fatalf("redistest: free port: %v", err)
		}
		cmd := exec.Command(bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
			"--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", i)),
			"--cluster-node-timeout", "2000",
			"--dir", dir, "--save", "", "--appendonly", "no",
			"--protected-mode", "no", "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			tb.Fatalf("redistest: start cluster node: %v", err)
		}
		c.cmds = append(c.cmds, cmd)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if err := waitReady("redis://"+addr, cmd); err != nil {
			tb.Fatalf("redistest: cluster node: %v", err)
		}
		c.addrs = append(c.addrs, addr)
	}
	args := append([]string{"--cluster", "create"}, c.addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitOK(masters * replicas)
	return c
}

// waitOK polls every node until it reports cluster_state:ok and sees all
// replicas attached; nodes give no other signal.
func (c *Cluster) waitOK(replicas int) {
	c.tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range c.addrs {
		n := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			info, err := n.ClusterInfo(ctx).Result()
			nodes, nerr := n.ClusterNodes(ctx).Result()
			cancel()
			if err == nil && nerr == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Count(nodes, "slave") == replicas && !strings.Contains(nodes, "handshake") && !strings.Contains(nodes, "fail") {
				break
			}
			if time.Now().After(deadline) {
				_ = n.Close()
				c.tb.Fatalf("redistest: cluster node %s not ok: %v %s", addr, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = n.Close()
	}
}

// URL is the cluster in go-redis's cluster URL form, as
// CORRAL_REDIS_URL takes it with CORRAL_REDIS_CLUSTER=true.
func (c *Cluster) URL() string {
	u := "redis://" + c.addrs[0]
	for i, a := range c.addrs[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + a
	}
	return u
}

// Client returns a new cluster client, closed at test cleanup.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs})
	c.tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

func (c *Cluster) stop() {
	for _, cmd := range c.cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}
