package config

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// interpolate resolves compose's ${VAR:-default} and ${VAR} as an empty
// environment would, and $$ as a literal $.
func interpolate(s string) string {
	s = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*(?::?-([^}]*))?\}`).ReplaceAllString(s, "$1")
	return strings.ReplaceAll(s, "$$", "$")
}

// portSpec splits a compose port "[ip:]host:container" after interpolation.
func portSpec(t *testing.T, spec string) (ip, host, container string) {
	t.Helper()
	parts := strings.Split(interpolate(spec), ":")
	switch len(parts) {
	case 2:
		return "", parts[0], parts[1]
	case 3:
		return parts[0], parts[1], parts[2]
	}
	t.Fatalf("port %q: want [ip:]host:container", spec)
	return "", "", ""
}

// gatewayServices are the services that run the gateway: the image's
// default entrypoint and a CORRAL_REDIS_URL, so they share one Redis.
func gatewayServices(services map[string]composeService) []string {
	var names []string
	for name, s := range services {
		if len(s.Entrypoint) == 0 && s.Build != "" && s.Environment["CORRAL_REDIS_URL"] != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestComposeSecureDefaults: compose publishes only the gateway (and the
// scale profile's load balancer) on every interface, binds the
// observability ports to loopback, publishes neither Redis nor the mock,
// and Grafana has no default password and no anonymous access.
func TestComposeSecureDefaults(t *testing.T) {
	services := loadCompose(t)
	public := map[string]bool{"gateway": true, "lb": true}
	for name, s := range services {
		for _, p := range s.Ports {
			ip, _, _ := portSpec(t, p)
			switch {
			case public[name]:
			case ip == "127.0.0.1":
			default:
				t.Errorf("service %s publishes %q on every interface; bind it to 127.0.0.1 or do not publish it", name, p)
			}
		}
	}
	for _, name := range []string{"redis", "mockllm", "gateway-scale"} {
		if len(services[name].Ports) != 0 {
			t.Errorf("service %s publishes %v; it is for the compose network only", name, services[name].Ports)
		}
	}
	for _, name := range []string{"prometheus", "grafana"} {
		if len(services[name].Ports) == 0 {
			t.Errorf("%s publishes nothing; want it on 127.0.0.1", name)
		}
	}

	graf := services["grafana"]
	pw := graf.Environment["GF_SECURITY_ADMIN_PASSWORD"]
	if got := interpolate(pw); got != "" || !strings.Contains(pw, "GRAFANA_ADMIN_PASSWORD") {
		t.Errorf("GF_SECURITY_ADMIN_PASSWORD = %q (%q without the variable); want GRAFANA_ADMIN_PASSWORD and no default", pw, got)
	}
	entry := interpolate(strings.Join(graf.Entrypoint, " "))
	for _, want := range []string{`[ -z "$GF_SECURITY_ADMIN_PASSWORD" ]`, "/dev/urandom", "export GF_SECURITY_ADMIN_PASSWORD", "exec /run.sh"} {
		if !strings.Contains(entry, want) {
			t.Errorf("grafana entrypoint %q lacks %q: an unset password must become a generated one", entry, want)
		}
	}
	if v := interpolate(graf.Environment["GF_AUTH_ANONYMOUS_ENABLED"]); v != "false" {
		t.Errorf("GF_AUTH_ANONYMOUS_ENABLED = %q by default; want false", v)
	}
}

// TestComposeGatewayLifecycle: every gateway service has the healthcheck
// subcommand as its healthcheck (the image is distroless), the same one the
// Dockerfile declares, a stop_grace_period above its drain, and waits for
// the mock model when the demo profile runs it.
func TestComposeGatewayLifecycle(t *testing.T) {
	services := loadCompose(t)
	names := gatewayServices(services)
	if !slices.Equal(names, []string{"gateway", "gateway-scale"}) {
		t.Fatalf("gateway services %v; want gateway and gateway-scale", names)
	}
	wantCheck := []string{"CMD", "/usr/local/bin/gateway", "healthcheck"}
	docker, err := os.ReadFile(repo + "Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docker), "COPY --from=build /out/gateway /usr/local/bin/gateway") ||
		!regexp.MustCompile(`(?m)^HEALTHCHECK .*\\\n\s+CMD \["/usr/local/bin/gateway", "healthcheck"\]`).Match(docker) {
		t.Error("the Dockerfile does not install /usr/local/bin/gateway with HEALTHCHECK CMD [\"/usr/local/bin/gateway\", \"healthcheck\"]")
	}
	for _, name := range names {
		s := services[name]
		if s.Healthcheck == nil || !slices.Equal(s.Healthcheck.Test, wantCheck) {
			t.Errorf("%s healthcheck = %+v; want %v", name, s.Healthcheck, wantCheck)
		}
		drain, err := time.ParseDuration(interpolate(s.Environment["CORRAL_SHUTDOWN_TIMEOUT"]))
		if err != nil {
			t.Errorf("%s: CORRAL_SHUTDOWN_TIMEOUT = %q; set it explicitly so stop_grace_period can be checked against it", name, s.Environment["CORRAL_SHUTDOWN_TIMEOUT"])
			continue
		}
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if err != nil || grace <= drain {
			t.Errorf("%s: stop_grace_period %q; want more than CORRAL_SHUTDOWN_TIMEOUT %s (Docker kills at 10s by default)", name, s.StopGracePeriod, drain)
		}
		dep, ok := s.DependsOn["mockllm"]
		if !ok || dep.Condition != "service_healthy" || dep.Required == nil || *dep.Required {
			t.Errorf("%s depends_on mockllm = %+v; want service_healthy, required: false (only under the demo profile)", name, dep)
		}
	}
	mock := services["mockllm"]
	if mock.Healthcheck == nil || !slices.Equal(mock.Healthcheck.Test[:3], wantCheck) || !slices.Contains(mock.Healthcheck.Test, "-url") {
		t.Errorf("mockllm healthcheck = %+v; want the gateway's healthcheck with -url", mock.Healthcheck)
	}
	for _, arg := range mock.Healthcheck.Test {
		if strings.HasPrefix(arg, "http://") && !strings.HasSuffix(arg, ":"+interpolate(mock.Environment["MOCKLLM_ADDR"])[1:]+"/v1/models") {
			t.Errorf("mockllm healthcheck URL %s is not on MOCKLLM_ADDR %s", arg, mock.Environment["MOCKLLM_ADDR"])
		}
	}
}

// TestComposeRedisMemoryBound: Redis has a maxmemory and evicts only keys
// with a TTL (volatile-lru): cache entries carry TTLs; keys without one
// are never evicted.
func TestComposeRedisMemoryBound(t *testing.T) {
	cmd := services(t, "redis").Command
	arg := func(flag string) string {
		i := slices.Index(cmd, flag)
		if i < 0 || i+1 >= len(cmd) {
			return ""
		}
		return interpolate(cmd[i+1])
	}
	if !regexp.MustCompile(`^[0-9]+(mb|gb)$`).MatchString(arg("--maxmemory")) {
		t.Errorf("redis --maxmemory = %q; want a size such as 256mb", arg("--maxmemory"))
	}
	if arg("--maxmemory-policy") != "volatile-lru" {
		t.Errorf("redis --maxmemory-policy = %q; want volatile-lru", arg("--maxmemory-policy"))
	}
}

func services(t *testing.T, name string) composeService {
	t.Helper()
	s, ok := loadCompose(t)[name]
	if !ok {
		t.Fatalf("compose has no %s service", name)
	}
	return s
}

// TestComposeScaleProfile: the scale profile runs three gateways behind
// nginx, whose config sends every request to the gateway services on
// their CORRAL_ADDR port, and publishes the load balancer's listen port.
func TestComposeScaleProfile(t *testing.T) {
	all := loadCompose(t)
	lb := all["lb"]
	if !slices.Equal(lb.Profiles, []string{"scale"}) || !strings.HasPrefix(lb.Image, "nginx:") {
		t.Fatalf("lb = profiles %v image %q; want an nginx image under the scale profile", lb.Profiles, lb.Image)
	}
	if !slices.Equal(all["gateway-scale"].Profiles, []string{"scale"}) {
		t.Errorf("gateway-scale profiles = %v; want [scale]", all["gateway-scale"].Profiles)
	}
	conf := lb.mount("/etc/nginx/nginx.conf")
	if conf == "" {
		t.Fatal("lb mounts no /etc/nginx/nginx.conf")
	}
	f, err := os.Open(conf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var servers []string
	listen := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), ";"))
		switch {
		case len(fields) >= 2 && fields[0] == "server" && fields[1] != "{":
			servers = append(servers, fields[1])
		case len(fields) == 2 && fields[0] == "listen":
			listen = fields[1]
		case len(fields) == 2 && fields[0] == "proxy_buffering" && fields[1] != "off":
			t.Error("nginx buffers responses; streams must pass event by event (proxy_buffering off)")
		}
	}
	port := gatewayPort(t, all)
	instances := 0
	for _, srv := range servers {
		host, p, _ := strings.Cut(srv, ":")
		s, ok := all[host]
		if !ok || !slices.Contains(gatewayServices(all), host) || p != port {
			t.Errorf("nginx upstream server %s is not a gateway service on port %s", srv, port)
			continue
		}
		n := 1
		if s.Deploy.Replicas != nil {
			n = *s.Deploy.Replicas
		}
		instances += n
		if dep := lb.DependsOn[host]; dep.Condition != "service_healthy" {
			t.Errorf("lb does not wait for a healthy %s", host)
		}
	}
	if instances != 3 {
		t.Errorf("nginx spreads over %d gateway instances (%v); want 3", instances, servers)
	}
	if len(lb.Ports) != 1 {
		t.Fatalf("lb ports = %v; want one", lb.Ports)
	}
	if _, _, c := portSpec(t, lb.Ports[0]); c != listen {
		t.Errorf("lb publishes container port %s; nginx listens on %s", c, listen)
	}
}

// TestDeployTenantsFiles: the production example accepts no key at all and
// says how to make one; the demo file is the only one with the demo key.
func TestDeployTenantsFiles(t *testing.T) {
	prod, err := LoadTenants(repo + "deploy/tenants.yaml")
	if err != nil {
		t.Fatalf("deploy/tenants.yaml: %v", err)
	}
	for _, tn := range prod.Tenants {
		if len(tn.Keys) != 0 {
			t.Errorf("deploy/tenants.yaml: tenant %s has a usable key; the production example ships with none", tn.ID)
		}
	}
	raw, _ := os.ReadFile(repo + "deploy/tenants.yaml")
	if !strings.Contains(string(raw), "gateway keygen") {
		t.Error("deploy/tenants.yaml does not say how to make a key (gateway keygen)")
	}
	demo, err := LoadTenants(repo + "deploy/tenants.demo.yaml")
	if err != nil {
		t.Fatalf("deploy/tenants.demo.yaml: %v", err)
	}
	const demoHash = "b23e69e0cf7859aee99b391622475d386d3080291e16a92b9977700edae38e1e" // sha256("sk-corral-demo")
	if len(demo.Tenants) != 1 || len(demo.Tenants[0].Keys) != 1 || demo.Tenants[0].Keys[0].SHA256 != demoHash {
		t.Errorf("deploy/tenants.demo.yaml = %+v; want the one demo tenant with the demo key", demo.Tenants)
	}
	// Compose mounts both where CORRAL_TENANTS_FILE can name them.
	gw := services(t, "gateway")
	for _, dst := range []string{"/etc/corral/tenants.yaml", "/etc/corral/tenants.demo.yaml"} {
		if gw.mount(dst) == "" {
			t.Errorf("gateway does not mount %s", dst)
		}
	}
}

// TestComposeRedisKeepsDurableState: Redis runs with an append-only file
// fsynced every second on a named volume, so API tenants and keys, object
// owners and the audit trail survive a restart of the container.
func TestComposeRedisKeepsDurableState(t *testing.T) {
	r := services(t, "redis")
	arg := func(flag string) string {
		i := slices.Index(r.Command, flag)
		if i < 0 || i+1 >= len(r.Command) {
			return ""
		}
		return r.Command[i+1]
	}
	if arg("--appendonly") != "yes" || arg("--appendfsync") != "everysec" {
		t.Errorf("redis command %v; want --appendonly yes --appendfsync everysec", r.Command)
	}
	named := false
	for _, v := range r.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		if dst == "/data" && src != "" && !strings.ContainsAny(src, "./") {
			named = true
		}
	}
	if !named {
		t.Errorf("redis volumes %v; want a named volume on /data", r.Volumes)
	}
}
