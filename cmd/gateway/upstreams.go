package main

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/metrics"
	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/redact"
	"github.com/corralhq/corral/internal/upstream"
)

// upstreamSet builds one generation of upstreams from the upstreams file
// (CORRAL_UPSTREAMS_FILE), reading each key from getenv. A file that does
// not validate is an error naming file, line and field.
func upstreamSet(cfg config.Config, getenv func(string) (string, bool), cl *clouds) (*failover.Set, []config.Upstream, error) {
	ups, err := config.LoadUpstreams(cfg.UpstreamsFile, getenv)
	if err != nil {
		return nil, nil, err
	}
	members := make([]*pool.Member, 0, len(ups))
	clients := make(map[string]failover.Doer, len(ups))
	for _, u := range ups {
		timeout := cfg.UpstreamTimeout
		if u.Timeout.Duration > 0 {
			timeout = u.Timeout.Duration
		}
		c, err := cl.doer(cfg, u, timeout)
		if err != nil {
			return nil, nil, fmt.Errorf("upstreams file %s: %s: %w", cfg.UpstreamsFile, u.Name, err)
		}
		members = append(members, &pool.Member{Name: u.Name, API: u.API, Provider: u.Provider, Models: u.Models, Aliases: aliasKeys(u), Priority: u.Priority, Weight: u.Weight})
		clients[u.Name] = c
	}
	return &failover.Set{Pool: pool.New(members, pool.Options{}), Clients: clients}, ups, nil
}

// newRouter routes over the upstreams file's upstreams, or over the one
// default upstream of CORRAL_UPSTREAM_URL when there is no file. reload
// re-reads the file (nil without one).
func newRouter(cfg config.Config, getenv func(string) (string, bool), cl *clouds, m *metrics.Metrics, tracer trace.Tracer, log *slog.Logger, demo bool) (r *failover.Router, reload func() (*failover.Set, error), err error) {
	opts := failover.Options{Timeout: cfg.UpstreamTimeout, Observer: m, Tracer: tracer}
	if demo {
		// The mock model speaks both APIs: one upstream for each.
		up, err := upstream.New(upstream.Options{BaseURL: cfg.UpstreamURL, Timeout: cfg.UpstreamTimeout, ForwardBaggage: cfg.ForwardBaggage})
		if err != nil {
			return nil, nil, err
		}
		ms := []*pool.Member{{Name: "mock", API: config.APIOpenAI, Weight: 1}, {Name: "mock-anthropic", API: config.APIAnthropic, Weight: 1}}
		opts.NoHealth = true
		return failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}), Clients: map[string]failover.Doer{"mock": up, "mock-anthropic": up}}, opts), nil, nil
	}
	if cfg.UpstreamsFile == "" {
		up, err := upstream.New(upstream.Options{BaseURL: cfg.UpstreamURL, APIKey: cfg.UpstreamAPIKey, Timeout: cfg.UpstreamTimeout, ForwardBaggage: cfg.ForwardBaggage})
		if err != nil {
			return nil, nil, err
		}
		return failover.Single(config.DefaultUpstream, config.APIOpenAI, up, opts), nil, nil
	}
	if _, set := getenv("CORRAL_UPSTREAM_URL"); set || cfg.UpstreamAPIKey != "" {
		log.Warn("CORRAL_UPSTREAMS_FILE is set: CORRAL_UPSTREAM_URL and CORRAL_UPSTREAM_API_KEY are ignored")
	}
	set, ups, err := upstreamSet(cfg, getenv, cl)
	if err != nil {
		return nil, nil, err
	}
	logUpstreams(log, ups)
	r = failover.New(set, opts)
	m.EnableUpstreams(func() []metrics.UpstreamState {
		now := time.Now()
		ms := r.Current().Pool.Members()
		out := make([]metrics.UpstreamState, len(ms))
		for i, mb := range ms {
			out[i] = metrics.UpstreamState{Name: mb.Name, API: mb.API, Provider: mb.ProviderName(), State: mb.State(now).String()}
		}
		return out
	})
	reload = func() (*failover.Set, error) {
		set, ups, err := upstreamSet(cfg, getenv, cl)
		if err == nil {
			logUpstreams(log, ups)
		}
		return set, err
	}
	return r, reload, nil
}

// logUpstreams names the configured upstreams, never their keys.
func logUpstreams(log *slog.Logger, ups []config.Upstream) {
	for _, u := range ups {
		log.Info("upstream", slog.String("name", u.Name), slog.String("api", u.API), slog.String("provider", u.Provider),
			slog.String("url", redact.URL(u.URL)), slog.Int("priority", u.Priority), slog.Int("weight", u.Weight),
			slog.Bool("key", u.APIKey != ""))
	}
}

// aliasKeys are u's alias globs in the file's order: the client model
// names its aliases answer to (the pool lists those without globs at
// GET /v1/models).
func aliasKeys(u config.Upstream) []string {
	if len(u.Aliases) == 0 {
		return nil
	}
	out := make([]string, len(u.Aliases))
	for i, a := range u.Aliases {
		out[i] = a.Glob
	}
	return out
}

// readyUpstream is one upstream as /readyz lists it: what it is and this
// instance's passive view of its health. Never its URL or key.
type readyUpstream struct {
	Name     string `json:"name"`
	API      string `json:"api"`
	Provider string `json:"provider"`
	State    string `json:"state"` // closed, cooling, open, half_open
}

// readyUpstreams lists r's current upstreams in their configured order.
// An open circuit does not make the instance unready: the others, or
// the probe, still serve.
func readyUpstreams(r *failover.Router) []readyUpstream {
	sn := r.Snapshot()
	out := make([]readyUpstream, len(sn))
	for i, u := range sn {
		out[i] = readyUpstream{Name: u.Name, API: u.API, Provider: u.Provider, State: u.State.String()}
	}
	return out
}
