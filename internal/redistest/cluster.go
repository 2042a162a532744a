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
	cmds  []*exec.Cmd // the node processes; nil once killed
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
	bins := lookPaths(tb, "", "redis-server", "redis-cli")
	bin, cli := bins[0], bins[1]
	dir := tb.TempDir()
	c := &Cluster{tb: tb}
	tb.Cleanup(c.stop)
	for i := range masters * (1 + replicas) {
		ndir := filepath.Join(dir, strconv.Itoa(i)) // replication files must not collide
		if err := os.Mkdir(ndir, 0o700); err != nil {
			tb.Fatal(err)
		}
		addr, cmd := startReady(tb, func(port int) *exec.Cmd {
			return exec.Command(bin,
				"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
				"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(freePort(tb)),
				"--cluster-config-file", filepath.Join(ndir, "nodes.conf"),
				"--cluster-node-timeout", "2000",
				// A replica promotes itself however long its link was down: a
				// test kills masters at will.
				"--cluster-replica-validity-factor", "0",
				"--dir", ndir, "--save", "", "--appendonly", "no",
				"--protected-mode", "no", "--loglevel", "warning")
		})
		c.cmds = append(c.cmds, cmd)
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
	deadline := time.Now().Add(settleTimeout)
	for _, addr := range c.addrs {
		n := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		pollUntil(c.tb, deadline, func(ctx context.Context) (bool, string) {
			info, err := n.ClusterInfo(ctx).Result()
			nodes, nerr := n.ClusterNodes(ctx).Result()
			ok := err == nil && nerr == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Count(nodes, "slave") == replicas && !strings.Contains(nodes, "handshake") && !strings.Contains(nodes, "fail")
			return ok, fmt.Sprintf("cluster node %s not ok: %v %s", addr, err, info)
		})
		_ = n.Close()
	}
}

// URL is the cluster in go-redis's cluster URL form, as
// CORRAL_REDIS_URL takes it with CORRAL_REDIS_CLUSTER=true.
func (c *Cluster) URL() string { return multiAddrURL(c.addrs) }

// Client returns a new cluster client, closed at test cleanup.
func (c *Cluster) Client() *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.addrs})
	c.tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// KillMaster kills one master's process (SIGKILL) and returns its address;
// its replica is promoted once the other nodes time it out (2 s).
func (c *Cluster) KillMaster() string {
	c.tb.Helper()
	for i, addr := range c.addrs {
		if c.cmds[i] == nil {
			continue
		}
		n := redis.NewClient(&redis.Options{Addr: addr})
		info, err := n.Info(context.Background(), "replication").Result()
		_ = n.Close()
		if err != nil || !strings.Contains(info, "role:master") {
			continue
		}
		_ = c.cmds[i].Process.Kill()
		_ = c.cmds[i].Wait()
		c.cmds[i] = nil
		return addr
	}
	c.tb.Fatal("redistest: no live master to kill")
	return ""
}

// WaitHealed polls the live nodes until each has marked dead (from
// KillMaster) as failed and reports cluster_state:ok again: a replica was
// promoted in its place.
func (c *Cluster) WaitHealed(dead string) {
	c.tb.Helper()
	deadline := time.Now().Add(settleTimeout)
	for i, addr := range c.addrs {
		if c.cmds[i] == nil {
			continue
		}
		n := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		pollUntil(c.tb, deadline, func(ctx context.Context) (bool, string) {
			info, err := n.ClusterInfo(ctx).Result()
			nodes, nerr := n.ClusterNodes(ctx).Result()
			ok := err == nil && nerr == nil && strings.Contains(info, "cluster_state:ok") && deadMarked(nodes, dead)
			return ok, fmt.Sprintf("cluster node %s not healed 30 s after a master died: %v\n%s", addr, err, nodes)
		})
		_ = n.Close()
	}
}

// deadMarked reports whether CLUSTER NODES output marks the node at addr
// as failed.
func deadMarked(nodes, addr string) bool {
	for line := range strings.Lines(nodes) {
		if strings.Contains(line, addr+"@") && strings.Contains(line, "fail") && !strings.Contains(line, "fail?") {
			return true
		}
	}
	return false
}

func (c *Cluster) stop() { killAll(c.cmds) }
