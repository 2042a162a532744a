package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// repo is the repository root, seen from this package.
const repo = "../../"

type composeService struct {
	Image       string            `yaml:"image"`
	Build       string            `yaml:"build"`
	Profiles    []string          `yaml:"profiles"`
	Ports       []string          `yaml:"ports"`
	Command     []string          `yaml:"command"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Environment map[string]string `yaml:"environment"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
		Required  *bool  `yaml:"required"`
	} `yaml:"depends_on"`
	Volumes         []string `yaml:"volumes"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
	Deploy          struct {
		Replicas *int `yaml:"replicas"`
	} `yaml:"deploy"`
}

// mount returns the repository path of the bind mount whose container
// path is dst ("" when there is none).
func (s composeService) mount(dst string) string {
	for _, v := range s.Volumes {
		src, rest, _ := strings.Cut(v, ":")
		if d, _, _ := strings.Cut(rest, ":"); d == dst {
			return repo + strings.TrimPrefix(src, "./")
		}
	}
	return ""
}

func loadCompose(t *testing.T) map[string]composeService {
	t.Helper()
	data, err := os.ReadFile(repo + "docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]composeService `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	return compose.Services
}

// gatewayPort is the port of the gateway's CORRAL_ADDR (":8080" → "8080").
func gatewayPort(t *testing.T, services map[string]composeService) string {
	t.Helper()
	addr := services["gateway"].Environment["CORRAL_ADDR"]
	_, port, ok := strings.Cut(addr, ":")
	if !ok || port == "" {
		t.Fatalf("gateway CORRAL_ADDR = %q; want host:port or :port", addr)
	}
	return port
}

// TestComposeMatchesConfig keeps docker-compose.yml honest without Docker:
// its services, ports and CORRAL_* names must match what Corral reads.
func TestComposeMatchesConfig(t *testing.T) {
	services := loadCompose(t)
	known := map[string]bool{}
	for f := range reflect.TypeFor[Config]().Fields() {
		known[f.Tag.Get("env")] = true
	}

	redis, ok := services["redis"]
	if !ok || redis.Healthcheck == nil {
		t.Fatal("compose needs a redis service with a healthcheck")
	}
	gw, ok := services["gateway"]
	if !ok {
		t.Fatal("compose needs a gateway service")
	}
	if len(gw.Profiles) != 0 || len(redis.Profiles) != 0 {
		t.Error("gateway and redis must run without a profile (plain docker compose up)")
	}
	if gw.DependsOn["redis"].Condition != "service_healthy" {
		t.Error("gateway must depend on a healthy redis")
	}
	for name, s := range services {
		for k := range s.Environment {
			if strings.HasPrefix(k, "CORRAL_") && !known[k] {
				t.Errorf("compose service %s sets %s, which Corral does not read", name, k)
			}
		}
	}
	if !strings.HasPrefix(gw.Environment["CORRAL_REDIS_URL"], "redis://redis:6379") {
		t.Errorf("gateway CORRAL_REDIS_URL = %q; want the redis service", gw.Environment["CORRAL_REDIS_URL"])
	}
	port := gatewayPort(t, services)
	if len(gw.Ports) == 0 || !strings.HasSuffix(gw.Ports[0], ":"+port) {
		t.Errorf("gateway ports %v do not publish CORRAL_ADDR port %s", gw.Ports, port)
	}
	tf := interpolate(gw.Environment["CORRAL_TENANTS_FILE"])
	mounted := false
	for _, v := range gw.Volumes {
		if src, dst, _ := strings.Cut(v, ":"); strings.HasPrefix(dst, tf) {
			mounted = true
			if _, err := LoadTenants(repo + strings.TrimPrefix(src, "./")); err != nil {
				t.Errorf("mounted tenants file is invalid: %v", err)
			}
		}
	}
	if !mounted {
		t.Errorf("CORRAL_TENANTS_FILE %q is not mounted into the gateway", tf)
	}
	mock, ok := services["mockllm"]
	if !ok || len(mock.Profiles) != 1 || mock.Profiles[0] != "demo" {
		t.Error("compose needs a mockllm service under the demo profile")
	}
	// The console comes with the admin token; its cookie setting is the
	// shell's, off by default, and a value Corral accepts.
	secure := interpolate(gw.Environment["CORRAL_CONSOLE_SECURE_COOKIE"])
	if secure != "false" {
		t.Errorf("gateway CORRAL_CONSOLE_SECURE_COOKIE defaults to %q; want false, set from the shell", secure)
	}
	if _, err := Load([]string{"CORRAL_CONSOLE_SECURE_COOKIE=" + secure, "CORRAL_ADMIN_TOKEN=x"}); err != nil {
		t.Errorf("the compose console settings do not load: %v", err)
	}
	header, err := os.ReadFile(repo + "docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(header), "/console/") || !strings.Contains(string(header), "CORRAL_CONSOLE_SECURE_COOKIE=true") {
		t.Error("docker-compose.yml's header does not say where the console is and when its cookie must be Secure")
	}
}

// promConfig is the part of prometheus.yml the gateway's scrape depends on.
type promConfig struct {
	Global struct {
		ScrapeInterval string `yaml:"scrape_interval"`
	} `yaml:"global"`
	ScrapeConfigs []struct {
		JobName        string `yaml:"job_name"`
		ScrapeInterval string `yaml:"scrape_interval"`
		MetricsPath    string `yaml:"metrics_path"`
		Scheme         string `yaml:"scheme"`
		Authorization  *struct {
			Type            string `yaml:"type"`
			Credentials     string `yaml:"credentials"`
			CredentialsFile string `yaml:"credentials_file"`
		} `yaml:"authorization"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// TestComposeObservability checks the observability profile against the
// gateway: Prometheus scrapes gateway:<CORRAL_ADDR port>/metrics every 5s
// with the admin token the gateway is given, and Grafana is provisioned
// with that Prometheus and the Corral dashboard.
func TestComposeObservability(t *testing.T) {
	services := loadCompose(t)
	port := gatewayPort(t, services)
	for _, name := range []string{"prometheus", "grafana"} {
		s, ok := services[name]
		if !ok {
			t.Fatalf("compose needs a %s service", name)
		}
		if !slices.Equal(s.Profiles, []string{"observability"}) {
			t.Errorf("%s profiles = %v; want [observability]", name, s.Profiles)
		}
	}
	prom, graf := services["prometheus"], services["grafana"]
	if !strings.HasPrefix(prom.Image, "prom/prometheus:") || !strings.HasPrefix(graf.Image, "grafana/grafana:") {
		t.Errorf("images %q, %q; want pinned prom/prometheus and grafana/grafana", prom.Image, graf.Image)
	}
	if !slices.ContainsFunc(graf.Ports, func(p string) bool { return strings.HasSuffix(p, ":3000") }) {
		t.Errorf("grafana ports %v do not publish 3000", graf.Ports)
	}
	if len(prom.Ports) == 0 || !strings.HasSuffix(prom.Ports[0], ":9090") {
		t.Fatalf("prometheus ports %v do not publish its 9090", prom.Ports)
	}

	// Prometheus: the mounted config scrapes the gateway.
	const promConfigPath = "/etc/prometheus/prometheus.yml"
	src := prom.mount(promConfigPath)
	if src == "" {
		t.Fatalf("prometheus does not mount a config at %s", promConfigPath)
	}
	entry := strings.Join(prom.Entrypoint, " ")
	if !strings.Contains(entry, "--config.file="+promConfigPath) {
		t.Errorf("prometheus entrypoint %q does not start Prometheus with %s", entry, promConfigPath)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var pc promConfig
	if err := yaml.Unmarshal(data, &pc); err != nil {
		t.Fatalf("parse %s: %v", src, err)
	}
	target := "gateway:" + port
	found := false
	for _, sc := range pc.ScrapeConfigs {
		var targets []string
		for _, s := range sc.StaticConfigs {
			targets = append(targets, s.Targets...)
		}
		if !slices.Contains(targets, target) {
			continue
		}
		found = true
		if sc.MetricsPath != "/metrics" {
			t.Errorf("job %s: metrics_path = %q; want /metrics", sc.JobName, sc.MetricsPath)
		}
		if sc.Scheme != "" && sc.Scheme != "http" {
			t.Errorf("job %s: scheme = %q; the gateway serves plain http", sc.JobName, sc.Scheme)
		}
		if iv := cmpOr(sc.ScrapeInterval, pc.Global.ScrapeInterval); iv != "5s" {
			t.Errorf("job %s: scrape interval %q; want 5s", sc.JobName, iv)
		}
		// /metrics needs CORRAL_ADMIN_TOKEN when it is set: Prometheus must
		// send it, from the file its entrypoint writes from the same
		// variable the gateway reads.
		a := sc.Authorization
		if a == nil || !strings.EqualFold(a.Type, "Bearer") || a.CredentialsFile == "" || a.Credentials != "" {
			t.Errorf("job %s: authorization %+v; want type Bearer with a credentials_file", sc.JobName, a)
			continue
		}
		if !strings.Contains(entry, "> "+a.CredentialsFile) || !strings.Contains(entry, "$CORRAL_ADMIN_TOKEN") {
			t.Errorf("prometheus entrypoint %q does not write $CORRAL_ADMIN_TOKEN to %s", entry, a.CredentialsFile)
		}
		if got, want := prom.Environment["CORRAL_ADMIN_TOKEN"], services["gateway"].Environment["CORRAL_ADMIN_TOKEN"]; got != want {
			t.Errorf("prometheus CORRAL_ADMIN_TOKEN = %q, gateway's = %q; they must be the same", got, want)
		}
	}
	if !found {
		t.Errorf("%s scrapes no %s", src, target)
	}

	// Grafana: the Prometheus data source and the dashboards provider.
	dsDir := graf.mount("/etc/grafana/provisioning/datasources")
	dbDir := graf.mount("/etc/grafana/provisioning/dashboards")
	if dsDir == "" || dbDir == "" {
		t.Fatalf("grafana volumes %v do not mount both provisioning directories", graf.Volumes)
	}
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, dsDir+"/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" ||
		ds.Datasources[0].URL != "http://prometheus:9090" || ds.Datasources[0].UID == "" {
		t.Errorf("data sources %+v; want one prometheus at http://prometheus:9090 with a uid", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, dbDir+"/corral.yml", &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers %+v; want one file provider", dp.Providers)
	}
	dashDir := graf.mount(dp.Providers[0].Options.Path)
	if dashDir == "" {
		t.Fatalf("the dashboards path %q is not mounted into grafana", dp.Providers[0].Options.Path)
	}
	if _, err := os.Stat(dashDir + "/corral.json"); err != nil {
		t.Errorf("the mounted dashboards directory lacks corral.json: %v", err)
	}
	if len(ds.Datasources) == 1 {
		d := loadDashboard(t)
		if v := d.variable("datasource"); v == nil || v.Current.Value != ds.Datasources[0].UID {
			t.Errorf("dashboard datasource variable %+v does not default to the provisioned uid %q", v, ds.Datasources[0].UID)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

type dashVariable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Definition string `json:"definition"`
	Current    struct {
		Value any `json:"value"`
	} `json:"current"`
}

type dashboard struct {
	SchemaVersion int `json:"schemaVersion"`
	Templating    struct {
		List []dashVariable `json:"list"`
	} `json:"templating"`
	raw any // the whole document, for walking
}

func (d *dashboard) variable(name string) *dashVariable {
	for i := range d.Templating.List {
		if d.Templating.List[i].Name == name {
			return &d.Templating.List[i]
		}
	}
	return nil
}

const dashboardPath = repo + "deploy/grafana/dashboards/corral.json"

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("parse %s: %v", dashboardPath, err)
	}
	if err := json.Unmarshal(data, &d.raw); err != nil {
		t.Fatal(err)
	}
	return &d
}

// definedMetrics reads Corral's metric names from the metrics package
// source: every Name: "corral_..." and which of them are histograms.
func definedMetrics(t *testing.T) (names, histograms map[string]bool) {
	t.Helper()
	var src []byte
	files, err := filepath.Glob("../metrics/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	names, histograms = map[string]bool{}, map[string]bool{}
	for _, m := range regexp.MustCompile(`(?:Name:\s*|NewDesc\()"(corral_[a-z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
		names[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`(?s)HistogramOpts\{.*?Name:\s*"(corral_[a-z0-9_]+)"`).FindAllStringSubmatch(string(src), -1) {
		histograms[m[1]] = true
	}
	if len(names) < 5 || len(histograms) == 0 {
		t.Fatalf("found metrics %v, histograms %v in metrics.go; has its layout changed?", names, histograms)
	}
	return names, histograms
}

// TestDashboardMetricsExist checks the Grafana dashboard against the
// metrics Corral defines: every corral_* name it mentions exists (a
// histogram's series with _bucket, _sum or _count), and the panels the
// dashboard promises are there.
func TestDashboardMetricsExist(t *testing.T) {
	names, histograms := definedMetrics(t)
	d := loadDashboard(t)
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d; want 36 or later", d.SchemaVersion)
	}
	if v := d.variable("tenant"); v == nil || v.Type != "query" ||
		strings.ReplaceAll(v.Definition, " ", "") != "label_values(corral_requests_total,tenant)" {
		t.Errorf("tenant variable %+v; want a query on label_values(corral_requests_total, tenant)", v)
	}

	metricRef := regexp.MustCompile(`\bcorral_[a-z0-9_]+`)
	used := map[string]bool{}
	var exprs []string
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(k, x)
			}
		case []any:
			for _, x := range v {
				walk(key, x)
			}
		case string:
			if key == "expr" {
				exprs = append(exprs, v)
			}
			for _, ref := range metricRef.FindAllString(v, -1) {
				used[ref] = true
				switch {
				case key == "expr" && histograms[ref]:
					t.Errorf("expression %q uses histogram %s without _bucket, _sum or _count", v, ref)
				case names[ref]:
				case histograms[strings.TrimSuffix(ref, "_bucket")],
					histograms[strings.TrimSuffix(ref, "_sum")],
					histograms[strings.TrimSuffix(ref, "_count")]:
				default:
					t.Errorf("dashboard refers to %s, which internal/metrics does not define (in %q)", ref, v)
				}
			}
		}
	}
	walk("", d.raw)
	if len(exprs) == 0 {
		t.Fatal("dashboard has no expressions")
	}
	for _, want := range []string{
		"corral_requests_total", "corral_upstream_calls_total", "corral_request_duration_seconds_bucket",
		"corral_upstream_duration_seconds_bucket", "corral_coalesced_wait_seconds_count",
		"corral_coalesced_wait_seconds_bucket", "corral_lock_takeovers_total", "corral_ratelimit_rejections_total",
		"corral_tokens_total", "corral_tokens_saved_total", "corral_redis_up", "corral_inflight_requests",
		"corral_inflight_streams",
	} {
		if !used[want] {
			t.Errorf("dashboard has no panel on %s", want)
		}
	}
	for _, e := range exprs {
		if strings.Contains(e, "_total") && !strings.Contains(e, "rate(") && !strings.Contains(e, "increase(") {
			t.Errorf("expression %q reads a counter without rate() or increase()", e)
		}
	}
}
