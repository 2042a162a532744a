package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// benchKey is the tenant key the load generator sends. The gateways know
// only its sha256, as in production.
const benchKey = "sk-corral-bench-0123456789abcdef"

// startAttempts is how often a server start is retried when its port was
// taken between picking and binding.
const startAttempts = 3

// cluster builds the binaries and starts the processes of one run.
type cluster struct {
	o   *Options
	ps  *procs
	dir string // temporary directory: binaries, tenants file

	gatewayBin, mockBin string
	floorCmd            []string // argv that runs this harness as a floor proxy
	tenantsFile         string

	mock *proc
	// redis is the private redis-server, rdb a client to it (INFO
	// commandstats); nil until startRedis.
	redis    *proc
	redisURL string
	rdb      *redis.Client
}

// build compiles cmd/gateway and cmd/mockllm from the source tree into
// the temporary directory and writes the tenants file.
func (c *cluster) build(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, c.o.goTool(), "build", "-o", c.dir+string(filepath.Separator), "./cmd/gateway", "./cmd/mockllm")
	cmd.Dir = c.o.SourceDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build in %s: %v\n%s", c.o.SourceDir, err, out)
	}
	c.gatewayBin = filepath.Join(c.dir, "gateway")
	c.mockBin = filepath.Join(c.dir, "mockllm")

	sum := sha256.Sum256([]byte(benchKey))
	// max_leaders is far above any scenario's concurrency, so the leader
	// semaphore never queues a request (the footprint scenario holds
	// thousands of upstream streams open); no rate limits.
	tenants := fmt.Sprintf("tenants:\n  - id: bench\n    keys:\n      - sha256: %q\n    max_leaders: 16384\n", hex.EncodeToString(sum[:]))
	c.tenantsFile = filepath.Join(c.dir, "tenants.yaml")
	return os.WriteFile(c.tenantsFile, []byte(tenants), 0o600)
}

// startServer starts a server process on a fresh loopback port and waits
// until readyPath answers 200, retrying on a port race.
func (c *cluster) startServer(ctx context.Context, name string, cpu int, readyPath string, argv func(addr string) (env []string, args []string)) (*proc, error) {
	var lastErr error
	for range startAttempts {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		env, args := argv(addr)
		p, err := c.ps.start(name, addr, cpu, env, args[0], args[1:]...)
		if err != nil {
			return nil, err
		}
		if lastErr = waitHTTP(ctx, p, "http://"+addr+readyPath, 15*time.Second); lastErr == nil {
			return p, nil
		}
		c.ps.stop(p, time.Second)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, lastErr
}

// startMock starts cmd/mockllm with its defaults (0 ms latency); the
// scenarios set latency and stream pacing per request with the body's
// "mock" member, so one mock process serves every scenario.
func (c *cluster) startMock(ctx context.Context) error {
	p, err := c.startServer(ctx, "mockllm", loadCPU, "/mock/stats", func(addr string) ([]string, []string) {
		return childEnv(), []string{c.mockBin, "-addr", addr}
	})
	c.mock = p
	return err
}

// startFloor starts the floor proxy in front of the mock.
func (c *cluster) startFloor(ctx context.Context, name string) (*proc, error) {
	return c.startFloorWith(ctx, name, false)
}

// startFloorWith starts the floor proxy; with profile and profiling on,
// it serves its profiles too (floorPprofEnv), sampled as finely as the
// footprint scenario's gateway. Only the footprint scenario asks: the
// load runs profile gateways alone.
func (c *cluster) startFloorWith(ctx context.Context, name string, profile bool) (*proc, error) {
	var pprofAddr string
	p, err := c.startServer(ctx, name, proxyCPU, "/mock/stats", func(addr string) ([]string, []string) {
		env := childEnv(roleEnv+"=floor", floorAddrEnv+"="+addr, floorUpstreamEnv+"=http://"+c.mock.addr)
		if profile && c.o.PprofDir != "" {
			if pa, err := freeAddr(); err == nil {
				pprofAddr = pa
				env = append(env, floorPprofEnv+"="+pa, "GODEBUG=memprofilerate=4096")
			}
		}
		return env, c.floorCmd
	})
	if p != nil {
		p.pprofAddr = pprofAddr
	}
	return p, err
}

// startGateway starts a Corral gateway in front of the mock, in Redis
// mode when withRedis is set; extra variables (e.g. CORRAL_LOG_LEVEL=info)
// override the defaults.
func (c *cluster) startGateway(ctx context.Context, name string, withRedis bool, extra ...string) (*proc, error) {
	var pprofAddr string
	p, err := c.startServer(ctx, name, proxyCPU, "/readyz", func(addr string) ([]string, []string) {
		env := childEnv(
			"CORRAL_ADDR="+addr,
			"CORRAL_UPSTREAM_URL=http://"+c.mock.addr+"/v1",
			"CORRAL_TENANTS_FILE="+c.tenantsFile,
			"CORRAL_LOG_LEVEL=error",
			"CORRAL_SHUTDOWN_TIMEOUT=1s",
			"CORRAL_DATA_DIR="+filepath.Join(c.dir, "data-"+name),
		)
		if withRedis {
			env = append(env, "CORRAL_REDIS_URL="+c.redisURL)
		}
		env = append(env, extra...) // os/exec keeps the last of duplicates
		if c.o.PprofDir != "" {
			// A taken port makes the gateway exit and startServer retry.
			if pa, err := freeAddr(); err == nil {
				pprofAddr = pa
				env = append(env, "CORRAL_PPROF_ADDR="+pa)
			}
		}
		return env, []string{c.gatewayBin}
	})
	if p != nil {
		p.pprofAddr = pprofAddr
	}
	return p, err
}

// startRedis starts a private redis-server with no persistence, pinned
// with the load generator.
func (c *cluster) startRedis(ctx context.Context) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return errors.New("redis-server not found on PATH (apt-get install redis-server)")
	}
	var lastErr error
	for range startAttempts {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		port := addr[strings.LastIndexByte(addr, ':')+1:]
		p, err := c.ps.start("redis-server", addr, loadCPU, childEnv(), bin,
			"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", c.dir, "--loglevel", "warning", "--maxclients", "10000")
		if err != nil {
			return err
		}
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		if lastErr = pingUntil(ctx, rdb, p, 10*time.Second); lastErr == nil {
			c.redis, c.redisURL, c.rdb = p, "redis://"+addr+"/0", rdb
			return nil
		}
		_ = rdb.Close()
		c.ps.stop(p, time.Second)
	}
	return lastErr
}

func pingUntil(ctx context.Context, rdb *redis.Client, p *proc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("redis-server exited (%v): %s", p.err, p.out.String())
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := rdb.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("redis-server not answering PING after %v", timeout)
}

// close stops every process and removes nothing: the caller removes dir.
func (c *cluster) close() {
	if c.rdb != nil {
		_ = c.rdb.Close()
	}
	c.ps.stopAll()
}

// mockRequests reads the mock's count of API requests (GET /mock/stats).
func (c *cluster) mockRequests(ctx context.Context) (int64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.mock.addr+"/mock/stats", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		Requests int64 `json:"requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("mock stats: %w", err)
	}
	return st.Requests, nil
}

// commandStats reads INFO commandstats: command → calls.
func (c *cluster) commandStats(ctx context.Context) (map[string]int64, error) {
	s, err := c.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	return parseCommandStats(s), nil
}

// parseCommandStats reads lines like
// "cmdstat_get:calls=12,usec=30,usec_per_call=2.50,rejected_calls=0,failed_calls=0".
func parseCommandStats(s string) map[string]int64 {
	m := make(map[string]int64)
	for line := range strings.Lines(s) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err == nil {
					m[name] = n
				}
			}
		}
	}
	return m
}
