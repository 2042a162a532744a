// Package config reads Corral's process configuration from the environment
// and its tenants from the tenants file.
//
// Every setting has a default so an empty environment starts a working
// gateway in embedded mode. A malformed value stops start-up with an error
// that names the variable (or, for the tenants file, the file, line and
// field), because a gateway that guesses at its configuration fails later
// and less clearly.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Config is the process configuration. Each field documents its variable
// and default.
type Config struct {
	// Addr is the listen address. CORRAL_ADDR, default ":8080".
	Addr string `env:"CORRAL_ADDR" envDefault:":8080"`
	// RedisURL selects distributed mode when set (redis:// or rediss://).
	// CORRAL_REDIS_URL, default empty (embedded mode).
	RedisURL string `env:"CORRAL_REDIS_URL"`
	// RedisCluster makes RedisURL the seed list of a Redis Cluster, in
	// go-redis's cluster URL form
	// (redis://[user:pass@]host1:7000?addr=host2:7001&addr=host3:7002).
	// CORRAL_REDIS_CLUSTER, default false.
	RedisCluster bool `env:"CORRAL_REDIS_CLUSTER"`
	// RedisSentinelMaster makes RedisURL's hosts (same form) Sentinels of
	// the master of this name. CORRAL_REDIS_SENTINEL_MASTER, default empty.
	RedisSentinelMaster string `env:"CORRAL_REDIS_SENTINEL_MASTER"`
	// TenantsFile is the YAML (or JSON) tenants file. CORRAL_TENANTS_FILE,
	// default empty (no tenants: every request is refused with 401).
	TenantsFile string `env:"CORRAL_TENANTS_FILE"`
	// UpstreamURL is the OpenAI-compatible base URL, including its /v1.
	// CORRAL_UPSTREAM_URL, default "https://api.openai.com/v1".
	UpstreamURL string `env:"CORRAL_UPSTREAM_URL" envDefault:"https://api.openai.com/v1"`
	// UpstreamAPIKey is the key Corral sends upstream; clients never see it.
	// CORRAL_UPSTREAM_API_KEY, falling back to OPENAI_API_KEY.
	UpstreamAPIKey string `env:"CORRAL_UPSTREAM_API_KEY"`
	// CacheTTL is the default positive-cache TTL. CORRAL_CACHE_TTL, default 1h.
	CacheTTL time.Duration `env:"CORRAL_CACHE_TTL" envDefault:"1h"`
	// NegativeTTL is the default negative-cache TTL. CORRAL_NEGATIVE_TTL, default 30s.
	NegativeTTL time.Duration `env:"CORRAL_NEGATIVE_TTL" envDefault:"30s"`
	// LockTTL is the Redis lock TTL; the leader renews it while its call is
	// alive. CORRAL_LOCK_TTL, default 10s.
	LockTTL time.Duration `env:"CORRAL_LOCK_TTL" envDefault:"10s"`
	// PollInterval is the waiters' safety-net poll. CORRAL_POLL_INTERVAL, default 50ms.
	PollInterval time.Duration `env:"CORRAL_POLL_INTERVAL" envDefault:"50ms"`
	// WaitTimeout is the longest a waiter waits for another instance's call
	// before calling upstream itself. CORRAL_WAIT_TIMEOUT, default 120s.
	WaitTimeout time.Duration `env:"CORRAL_WAIT_TIMEOUT" envDefault:"120s"`
	// WaitTimeoutFail answers 504 when WaitTimeout passes instead of calling
	// upstream. CORRAL_WAIT_TIMEOUT_FAIL, default false.
	WaitTimeoutFail bool `env:"CORRAL_WAIT_TIMEOUT_FAIL" envDefault:"false"`
	// LeaderWait bounds the wait for a tenant's max_leaders permit before
	// 429 tenant_concurrency_exceeded. CORRAL_LEADER_WAIT, default 10s.
	LeaderWait time.Duration `env:"CORRAL_LEADER_WAIT" envDefault:"10s"`
	// UpstreamTimeout bounds one upstream call, streams included.
	// CORRAL_UPSTREAM_TIMEOUT, default 120s.
	UpstreamTimeout time.Duration `env:"CORRAL_UPSTREAM_TIMEOUT" envDefault:"120s"`
	// MaxBodyBytes is the request body limit; larger bodies get 413.
	// CORRAL_MAX_BODY_BYTES, default 8MiB.
	MaxBodyBytes ByteSize `env:"CORRAL_MAX_BODY_BYTES" envDefault:"8MiB"`
	// AdminToken enables the admin endpoints with this bearer token.
	// CORRAL_ADMIN_TOKEN, default empty (admin disabled).
	AdminToken string `env:"CORRAL_ADMIN_TOKEN"`
	// PprofAddr serves Go's net/http/pprof profiles on this separate
	// address (keep it on loopback). CORRAL_PPROF_ADDR, default empty (off).
	PprofAddr string `env:"CORRAL_PPROF_ADDR"`
	// LogLevel is debug, info, warn or error. CORRAL_LOG_LEVEL, default info.
	LogLevel string `env:"CORRAL_LOG_LEVEL" envDefault:"info"`
	// ShutdownTimeout is how long in-flight requests and streams may run
	// after SIGTERM before they are cut. CORRAL_SHUTDOWN_TIMEOUT, default 30s.
	ShutdownTimeout time.Duration `env:"CORRAL_SHUTDOWN_TIMEOUT" envDefault:"30s"`
	// DataDir holds embedded mode's persistent state: which tenant owns
	// which stored object (objects.db). Unused in distributed mode, where
	// ownership lives in Redis. CORRAL_DATA_DIR, default ./corral-data.
	DataDir string `env:"CORRAL_DATA_DIR" envDefault:"./corral-data"`
}

// Error is a configuration problem tied to one variable.
type Error struct {
	Var     string // the environment variable, e.g. CORRAL_CACHE_TTL
	Value   string // the offending value ("" when not useful)
	Problem string
}

func (e *Error) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("config: %s: %s", e.Var, e.Problem)
	}
	return fmt.Sprintf("config: %s=%q: %s", e.Var, e.Value, e.Problem)
}

// Load reads the configuration from environ (KEY=VALUE pairs, as
// os.Environ returns) and validates it.
func Load(environ []string) (Config, error) {
	vars := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	var c Config
	if err := env.ParseWithOptions(&c, env.Options{Environment: vars}); err != nil {
		return Config{}, envError(err, vars)
	}
	if c.UpstreamAPIKey == "" {
		c.UpstreamAPIKey = vars["OPENAI_API_KEY"]
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks values that parse but make no sense.
func (c *Config) Validate() error {
	var errs []error
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"CORRAL_CACHE_TTL", c.CacheTTL},
		{"CORRAL_NEGATIVE_TTL", c.NegativeTTL},
		{"CORRAL_LOCK_TTL", c.LockTTL},
		{"CORRAL_POLL_INTERVAL", c.PollInterval},
		{"CORRAL_WAIT_TIMEOUT", c.WaitTimeout},
		{"CORRAL_LEADER_WAIT", c.LeaderWait},
		{"CORRAL_UPSTREAM_TIMEOUT", c.UpstreamTimeout},
		{"CORRAL_SHUTDOWN_TIMEOUT", c.ShutdownTimeout},
	}
	for _, p := range positive {
		if p.d <= 0 {
			errs = append(errs, &Error{Var: p.name, Value: p.d.String(), Problem: "must be a positive duration"})
		}
	}
	if c.MaxBodyBytes <= 0 {
		errs = append(errs, &Error{Var: "CORRAL_MAX_BODY_BYTES", Value: c.MaxBodyBytes.String(), Problem: "must be positive"})
	}
	if u, err := url.Parse(c.UpstreamURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, &Error{Var: "CORRAL_UPSTREAM_URL", Value: c.UpstreamURL, Problem: "must be an http:// or https:// URL"})
	}
	if c.RedisURL != "" {
		if u, err := url.Parse(c.RedisURL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			// The value may carry a password: name the variable only.
			errs = append(errs, &Error{Var: "CORRAL_REDIS_URL", Problem: "must be a redis:// or rediss:// URL"})
		}
	}
	if c.RedisCluster && c.RedisSentinelMaster != "" {
		errs = append(errs, &Error{Var: "CORRAL_REDIS_SENTINEL_MASTER", Value: c.RedisSentinelMaster, Problem: "cannot be set with CORRAL_REDIS_CLUSTER=true"})
	}
	if c.RedisURL == "" && (c.RedisCluster || c.RedisSentinelMaster != "") {
		errs = append(errs, &Error{Var: "CORRAL_REDIS_URL", Problem: "must be set with CORRAL_REDIS_CLUSTER or CORRAL_REDIS_SENTINEL_MASTER"})
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, &Error{Var: "CORRAL_LOG_LEVEL", Value: c.LogLevel, Problem: "must be debug, info, warn or error"})
	}
	return errors.Join(errs...)
}

// envError turns the env library's errors, which name Go struct fields,
// into errors that name the environment variable an operator set.
func envError(err error, vars map[string]string) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return fmt.Errorf("config: %w", err)
	}
	t := reflect.TypeFor[Config]()
	var errs []error
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := t.FieldByName(pe.Name); ok {
				name := f.Tag.Get("env")
				val := vars[name]
				if val == "" {
					val = f.Tag.Get("envDefault")
				}
				errs = append(errs, &Error{Var: name, Value: val, Problem: problem(pe.Err)})
				continue
			}
		}
		errs = append(errs, fmt.Errorf("config: %w", e))
	}
	return errors.Join(errs...)
}

func problem(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "time: ") {
		return "not a duration (use Go syntax such as 30s, 5m, 1h)"
	}
	return msg
}
