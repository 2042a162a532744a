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

// Config is the process configuration. Each field carries its variable
// (env), its default (envDefault) and its meaning (doc, plain text); `gateway
// help` and the README's table are generated from these tags (see Vars), so
// a new variable is a field with its tags and nothing else. docDefault
// replaces envDefault in the docs where the default is not a literal value.
type Config struct {
	Addr                string        `env:"CORRAL_ADDR" envDefault:":8080" doc:"listen address"`
	RedisURL            string        `env:"CORRAL_REDIS_URL" doc:"redis:// or rediss:// URL; empty = embedded mode"`
	RedisCluster        bool          `env:"CORRAL_REDIS_CLUSTER" envDefault:"false" doc:"true = CORRAL_REDIS_URL is the seed list of a Redis Cluster, in go-redis's cluster URL form redis://[user:pass@]host1:7000?addr=host2:7001&addr=host3:7002"`
	RedisSentinelMaster string        `env:"CORRAL_REDIS_SENTINEL_MASTER" doc:"master name: CORRAL_REDIS_URL's hosts (same form) are Sentinels of that master; not with CORRAL_REDIS_CLUSTER"`
	TenantsFile         string        `env:"CORRAL_TENANTS_FILE" doc:"tenants file (YAML; JSON is valid YAML); empty = no tenants, every request 401"`
	UpstreamsFile       string        `env:"CORRAL_UPSTREAMS_FILE" doc:"upstreams file (YAML): several upstreams with routing and failover; empty = the one upstream of CORRAL_UPSTREAM_URL"`
	PricesFile          string        `env:"CORRAL_PRICES_FILE" doc:"prices file (YAML): USD per million tokens per model glob, for cost_usd, saved_usd and budgets; empty = nothing priced (the demo prices the mock's models); see deploy/prices.yaml"`
	UpstreamURL         string        `env:"CORRAL_UPSTREAM_URL" envDefault:"https://api.openai.com/v1" doc:"upstream base URL, including its /v1; checked once at start-up with GET /models (a failure is only a warning)"`
	UpstreamAPIKey      string        `env:"CORRAL_UPSTREAM_API_KEY" docDefault:"OPENAI_API_KEY" doc:"key Corral sends upstream; clients never see it"`
	AllowDemoKey        bool          `env:"CORRAL_ALLOW_DEMO_KEY" envDefault:"false" doc:"true = start although a tenant accepts the public demo key sk-corral-demo while an upstream key is set (refused otherwise: anyone could spend that key)"`
	CacheTTL            time.Duration `env:"CORRAL_CACHE_TTL" envDefault:"1h" doc:"default positive TTL"`
	NegativeTTL         time.Duration `env:"CORRAL_NEGATIVE_TTL" envDefault:"30s" doc:"default negative TTL"`
	StaleRevalidate     time.Duration `env:"CORRAL_STALE_WHILE_REVALIDATE" envDefault:"0s" doc:"default stale_while_revalidate: how long past its TTL an entry is served at once while one background call refreshes it; 0 = off"`
	StaleIfError        time.Duration `env:"CORRAL_STALE_IF_ERROR" envDefault:"0s" doc:"default stale_if_error: how long past its TTL an entry is served when the upstream fails transiently; 0 = off"`
	LockTTL             time.Duration `env:"CORRAL_LOCK_TTL" envDefault:"10s" doc:"Redis lock TTL; the leader renews it every TTL/3 while its call is alive"`
	PollInterval        time.Duration `env:"CORRAL_POLL_INTERVAL" envDefault:"50ms" doc:"safety-net poll of waiters (pub/sub wakes them first)"`
	WaitTimeout         time.Duration `env:"CORRAL_WAIT_TIMEOUT" envDefault:"120s" doc:"longest a waiter waits for another instance's call before calling upstream itself"`
	WaitTimeoutFail     bool          `env:"CORRAL_WAIT_TIMEOUT_FAIL" envDefault:"false" doc:"true = answer 504 upstream_timeout instead of calling upstream when the wait times out"`
	LeaderWait          time.Duration `env:"CORRAL_LEADER_WAIT" envDefault:"10s" doc:"longest a leader waits for its tenant's max_leaders permit before 429 tenant_concurrency_exceeded"`
	UpstreamTimeout     time.Duration `env:"CORRAL_UPSTREAM_TIMEOUT" envDefault:"120s" doc:"one upstream call, from dial to the last byte of a stream"`
	MaxBodyBytes        ByteSize      `env:"CORRAL_MAX_BODY_BYTES" envDefault:"8MiB" doc:"request body limit; larger bodies get 413 request_too_large"`
	AdminToken          string        `env:"CORRAL_ADMIN_TOKEN" doc:"bearer token for admin endpoints; empty = admin disabled"`
	ConsoleSecureCookie bool          `env:"CORRAL_CONSOLE_SECURE_COOKIE" envDefault:"false" doc:"true = mark the console's session cookie Secure on plain HTTP too, for a gateway behind a TLS-terminating proxy (a TLS request always gets it); the console's Origin check then also accepts https://<host>"`
	LogLevel            string        `env:"CORRAL_LOG_LEVEL" envDefault:"info" doc:"debug, info, warn or error (JSON logs on stderr). Every request, on any path, gets an access line (msg request) at info, except probes and scrapes (GET or HEAD of /healthz, /readyz, /metrics), logged at debug so a load balancer polling every few seconds does not drown the log"`
	PprofAddr           string        `env:"CORRAL_PPROF_ADDR" doc:"serve Go's net/http/pprof on this separate address (keep it on loopback); empty = off"`
	ShutdownTimeout     time.Duration `env:"CORRAL_SHUTDOWN_TIMEOUT" envDefault:"30s" doc:"on SIGTERM/SIGINT, how long in-flight requests and streams may finish; then every open stream ends with its API's error event, locks and live streams are released, and the process exits within it; give an orchestrator's grace period more"`
	ForwardBaggage      bool          `env:"CORRAL_FORWARD_BAGGAGE" envDefault:"false" doc:"true = forward a client's W3C baggage header to the upstreams; false drops it (it is whatever the client wrote, often user or account data, and Corral's upstreams are shared third parties)"`
	DataDir             string        `env:"CORRAL_DATA_DIR" envDefault:"./corral-data" doc:"embedded mode's persistent state: who owns which stored object (objects.db), the admin API's tenants, keys and audit trail (tenants.db), the console's sign-outs (sessions.db), budgets' spend (spend.db), usage and chargeback rows (usage.db); unused in distributed mode"`
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
	for _, w := range []struct {
		name string
		d    time.Duration
	}{{"CORRAL_STALE_WHILE_REVALIDATE", c.StaleRevalidate}, {"CORRAL_STALE_IF_ERROR", c.StaleIfError}} {
		if w.d < 0 {
			errs = append(errs, &Error{Var: w.name, Value: w.d.String(), Problem: "must be 0 (off) or a positive duration"})
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
