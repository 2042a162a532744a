package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name a Sentinel set from StartSentinel
// watches.
const SentinelMaster = "corral"

// Sentinel is a real local Sentinel set owned by a test: one master, its
// replicas and three Sentinels watching them, each its own process.
type Sentinel struct {
	tb        testing.TB
	master    string   // host:port of the first master
	replicas  []string // host:port of its replicas
	sentinels []string // host:port of the Sentinels
	cmds      []*exec.Cmd
}

// StartSentinel starts a master with replicas replicas and three Sentinels
// (quorum 2, down after 1 s) and waits until every Sentinel sees the master,
// its replicas and the other Sentinels, so a failover can run.
func StartSentinel(tb testing.TB, replicas int) *Sentinel {
	tb.Helper()
	bin := lookPaths(tb, "", "redis-server")[0]
	dir := tb.TempDir()
	s := &Sentinel{tb: tb}
	tb.Cleanup(s.stop)
	start := func(args ...string) string {
		addr, cmd := startReady(tb, func(port int) *exec.Cmd {
			if len(args) > 0 && args[0][0] != '-' {
				// A config file must come first (sentinels need one to write).
				return exec.Command(bin, append([]string{args[0], "--port", strconv.Itoa(port)}, args[1:]...)...)
			}
			return exec.Command(bin, append([]string{"--port", strconv.Itoa(port)}, args...)...)
		})
		s.cmds = append(s.cmds, cmd)
		return addr
	}
	common := []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning", "--dir", dir}
	s.master = start(common...)
	host, port, _ := splitAddr(s.master)
	for range replicas {
		s.replicas = append(s.replicas, start(append([]string{"--replicaof", host, port}, common...)...))
	}
	for i := range 3 {
		conf := filepath.Join(dir, fmt.Sprintf("sentinel-%d.conf", i))
		body := fmt.Sprintf("bind 127.0.0.1\nprotected-mode no\ndir %s\n"+
			"sentinel monitor %s %s %s 2\nsentinel down-after-milliseconds %[2]s 1000\n"+
			"sentinel failover-timeout %[2]s 5000\nsentinel parallel-syncs %[2]s 1\n", dir, SentinelMaster, host, port)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			tb.Fatal(err)
		}
		s.sentinels = append(s.sentinels, start(conf, "--sentinel"))
	}
	s.waitWatching(replicas)
	return s
}

func splitAddr(addr string) (host, port string, err error) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("no port in %q", addr)
}

// waitWatching polls each Sentinel until it knows the replicas and the two
// other Sentinels; Sentinels give no other signal.
func (s *Sentinel) waitWatching(replicas int) {
	s.tb.Helper()
	deadline := time.Now().Add(settleTimeout)
	for _, addr := range s.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr, MaxRetries: -1})
		pollUntil(s.tb, deadline, func(ctx context.Context) (bool, string) {
			reps, err := sc.Replicas(ctx, SentinelMaster).Result()
			sens, serr := sc.Sentinels(ctx, SentinelMaster).Result()
			ok := err == nil && serr == nil && len(reps) == replicas && len(sens) == len(s.sentinels)-1
			return ok, fmt.Sprintf("sentinel %s sees %d replicas and %d sentinels (%v, %v)", addr, len(reps), len(sens), err, serr)
		})
		_ = sc.Close()
	}
}

// URL lists the Sentinels in go-redis's cluster URL form, as
// CORRAL_REDIS_URL takes them with CORRAL_REDIS_SENTINEL_MASTER.
func (s *Sentinel) URL() string { return multiAddrURL(s.sentinels) }

// Failover asks a Sentinel to promote a replica now and waits until the
// Sentinels name a new master.
func (s *Sentinel) Failover() {
	s.tb.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinels[0]})
	defer sc.Close()
	ctx := context.Background()
	before, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		s.tb.Fatalf("redistest: master: %v", err)
	}
	if err := sc.Failover(ctx, SentinelMaster).Err(); err != nil {
		s.tb.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
	}
	pollUntil(s.tb, time.Now().Add(settleTimeout), func(ctx context.Context) (bool, string) {
		now, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		return err == nil && len(now) == 2 && now[1] != before[1], "no new master 30 s after SENTINEL FAILOVER"
	})
}

func (s *Sentinel) stop() { killAll(s.cmds) }
