// Package helm holds the tests of Corral's Helm chart (deploy/helm/corral).
// They run the real Helm, pinned in tools/helm (a module of its own, so the
// gateway's go.mod stays small), through `go tool`, which builds it once
// and caches the executable; no cluster and no Docker are needed.
package helm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/telemetry/otlp"
)

const (
	chart   = "corral"
	example = "corral/values-example.yaml"
)

// helm runs the pinned Helm in this directory and returns its stdout.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, append([]string{"-C", filepath.Join(wd, "../../tools/helm"), "tool", "helm"}, args...)...)
	cmd.Env = append(os.Environ(), "GOWORK=off", "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// chartPath makes a path below deploy/helm absolute for Helm, which runs in
// tools/helm.
func chartPath(t *testing.T, rel string) string {
	t.Helper()
	abs, err := filepath.Abs(rel)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// object is the part of a rendered Kubernetes object the tests read.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		// Service
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
		// HPA
		ScaleTargetRef struct {
			Kind string `yaml:"kind"`
			Name string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		// PDB
		MinAvailable any `yaml:"minAvailable"`
		// ServiceMonitor
		Endpoints []struct {
			Port          string `yaml:"port"`
			Path          string `yaml:"path"`
			Authorization *struct {
				Type        string `yaml:"type"`
				Credentials struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"credentials"`
			} `yaml:"authorization"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    int   `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
	Volumes    []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name string `yaml:"name"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

type container struct {
	Name  string `yaml:"name"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name      string  `yaml:"name"`
		Value     *string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	StartupProbe    *probe `yaml:"startupProbe"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	} `yaml:"securityContext"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// render runs helm template and indexes the objects by kind.
func render(t *testing.T, args ...string) map[string]object {
	t.Helper()
	out, err := helm(t, append([]string{"template", "corral", chartPath(t, chart)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]object{}
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered chart is not YAML: %v\n%s", err, doc)
		}
		if o.Kind == "" {
			continue // a document of comments only
		}
		if _, dup := objs[o.Kind]; dup {
			t.Fatalf("two %s objects rendered; the tests expect one of each kind", o.Kind)
		}
		objs[o.Kind] = o
	}
	return objs
}

func TestChartLint(t *testing.T) {
	for _, args := range [][]string{nil, {"-f", chartPath(t, example)}} {
		if out, err := helm(t, append([]string{"lint", "--strict", chartPath(t, chart)}, args...)...); err != nil {
			t.Errorf("helm lint %v: %v\n%s", args, err, out)
		}
	}
}

// TestChartObjects: the example values yield the Deployment, Service,
// ConfigMap, HPA, PodDisruptionBudget and ServiceMonitor, and the defaults
// only the first three; the chart renders no Secret (keys are references).
func TestChartObjects(t *testing.T) {
	kinds := func(objs map[string]object) []string {
		var k []string
		for kind := range objs {
			k = append(k, kind)
		}
		slices.Sort(k)
		return k
	}
	if got, want := kinds(render(t)), []string{"ConfigMap", "Deployment", "Service"}; !slices.Equal(got, want) {
		t.Errorf("default values render %v; want %v", got, want)
	}
	objs := render(t, "-f", chartPath(t, example))
	want := []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service", "ServiceMonitor"}
	if got := kinds(objs); !slices.Equal(got, want) {
		t.Fatalf("example values render %v; want %v", got, want)
	}
	dep := objs["Deployment"]
	if dep.Spec.Replicas != nil {
		t.Errorf("Deployment sets replicas %d while the HPA owns them", *dep.Spec.Replicas)
	}
	if hpa := objs["HorizontalPodAutoscaler"]; hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != dep.Metadata.Name {
		t.Errorf("HPA scales %+v; want the Deployment %s", hpa.Spec.ScaleTargetRef, dep.Metadata.Name)
	}
	sel := dep.Spec.Selector.MatchLabels
	for kind, got := range map[string]map[string]string{
		"PodDisruptionBudget": objs["PodDisruptionBudget"].Spec.Selector.MatchLabels,
		"ServiceMonitor":      objs["ServiceMonitor"].Spec.Selector.MatchLabels,
	} {
		if len(got) == 0 || fmt.Sprint(got) != fmt.Sprint(sel) {
			t.Errorf("%s selects %v; want the Deployment's %v", kind, got, sel)
		}
	}
	for k, v := range sel {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("pod labels %v do not match the selector %v", dep.Spec.Template.Metadata.Labels, sel)
		}
	}
	sm := objs["ServiceMonitor"].Spec.Endpoints
	if len(sm) != 1 || sm[0].Port != "http" || sm[0].Path != "/metrics" || sm[0].Authorization == nil ||
		sm[0].Authorization.Credentials.Name != "corral-admin" {
		t.Errorf("ServiceMonitor endpoints %+v; want /metrics on the http port with the admin token's Secret", sm)
	}
}

// TestChartMatchesConfig checks the rendered Deployment against what
// Corral reads, as the compose test does: every CORRAL_* name is a
// variable of config.Config, the port of CORRAL_ADDR is the container's and
// the Service's, the probes hit /healthz and /readyz on it, the grace
// period outlasts CORRAL_SHUTDOWN_TIMEOUT, keys come from Secrets, and the
// tenants ConfigMap is a valid tenants file mounted where
// CORRAL_TENANTS_FILE points.
func TestChartMatchesConfig(t *testing.T) {
	known := map[string]bool{}
	for _, v := range config.Vars() {
		known[v.Name] = true
	}
	objs := render(t, "-f", chartPath(t, example))
	dep := objs["Deployment"]
	pod := dep.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("pod has %d containers; want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		if !known[e.Name] && !otlp.Reads(e.Name) {
			t.Errorf("Deployment sets %s, which Corral does not read", e.Name)
		}
		switch {
		case e.Value != nil:
			env[e.Name] = *e.Value
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name
		}
	}
	for _, name := range []string{"CORRAL_UPSTREAM_API_KEY", "CORRAL_ADMIN_TOKEN"} {
		if !strings.HasPrefix(env[name], "secret:") {
			t.Errorf("%s = %q; want it from a Secret", name, env[name])
		}
	}
	if env["CORRAL_REDIS_URL"] == "" {
		t.Error("the example values set no CORRAL_REDIS_URL")
	}
	// The console sits behind the example's TLS: its cookie must be Secure.
	if env["CORRAL_CONSOLE_SECURE_COOKIE"] != "true" {
		t.Errorf("CORRAL_CONSOLE_SECURE_COOKIE = %q; want true (console.secureCookie in the example)", env["CORRAL_CONSOLE_SECURE_COOKIE"])
	}
	if _, err := config.Load(plainEnv(env)); err != nil {
		t.Errorf("the rendered environment does not load: %v", err)
	}

	_, port, _ := strings.Cut(env["CORRAL_ADDR"], ":")
	if len(c.Ports) != 1 || strconv.Itoa(c.Ports[0].ContainerPort) != port || c.Ports[0].Name != "http" {
		t.Errorf("container ports %+v; want http on CORRAL_ADDR's %s", c.Ports, port)
	}
	svc := objs["Service"].Spec.Ports
	if len(svc) != 1 || fmt.Sprint(svc[0].TargetPort) != "http" {
		t.Errorf("Service ports %+v; want one targeting the http port", svc)
	}
	for name, tt := range map[string]struct {
		p    *probe
		path string
	}{
		"startup": {c.StartupProbe, "/healthz"}, "liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"},
	} {
		if tt.p == nil || tt.p.HTTPGet.Path != tt.path || fmt.Sprint(tt.p.HTTPGet.Port) != "http" {
			t.Errorf("%s probe %+v; want GET %s on the http port", name, tt.p, tt.path)
		}
	}

	drain, err := time.ParseDuration(env["CORRAL_SHUTDOWN_TIMEOUT"])
	if err != nil {
		t.Fatalf("CORRAL_SHUTDOWN_TIMEOUT = %q: %v", env["CORRAL_SHUTDOWN_TIMEOUT"], err)
	}
	if grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second; grace <= drain {
		t.Errorf("terminationGracePeriodSeconds %s; want more than CORRAL_SHUTDOWN_TIMEOUT %s", grace, drain)
	}
	if r := pod.SecurityContext.RunAsNonRoot; r == nil || !*r || pod.SecurityContext.RunAsUser == 0 {
		t.Error("pod does not run as non-root")
	}
	if r := c.SecurityContext.ReadOnlyRootFilesystem; r == nil || !*r {
		t.Error("container root filesystem is not read-only")
	}
	if r := c.SecurityContext.AllowPrivilegeEscalation; r == nil || *r {
		t.Error("container allows privilege escalation")
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" {
		t.Errorf("resource requests %v; want cpu and memory", c.Resources.Requests)
	}

	// The root filesystem is read-only: CORRAL_DATA_DIR must be a volume.
	dataMounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == env["CORRAL_DATA_DIR"] {
			dataMounted = true
		}
	}
	if env["CORRAL_DATA_DIR"] == "" || !dataMounted {
		t.Errorf("CORRAL_DATA_DIR %q is not a mounted volume; a read-only root filesystem cannot hold it", env["CORRAL_DATA_DIR"])
	}

	// The tenants file: the ConfigMap's tenants.yaml, mounted at the
	// directory of CORRAL_TENANTS_FILE, is a file Corral accepts.
	cm := objs["ConfigMap"]
	if _, err := config.ParseTenants("tenants.yaml (ConfigMap)", []byte(cm.Data["tenants.yaml"])); err != nil {
		t.Errorf("ConfigMap tenants.yaml: %v", err)
	}
	dir, file := filepath.Split(env["CORRAL_TENANTS_FILE"])
	if _, ok := cm.Data[file]; !ok {
		t.Errorf("CORRAL_TENANTS_FILE %s names no key of the ConfigMap", env["CORRAL_TENANTS_FILE"])
	}
	mounted := ""
	for _, m := range c.VolumeMounts {
		if strings.TrimSuffix(m.MountPath, "/")+"/" == dir {
			mounted = m.Name
		}
	}
	found := false
	for _, v := range pod.Volumes {
		if v.Name == mounted && v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name {
			found = true
		}
	}
	if !found {
		t.Errorf("the ConfigMap %s is not mounted at %s", cm.Metadata.Name, dir)
	}
}

// plainEnv turns the rendered variables into KEY=VALUE pairs for
// config.Load, with a stand-in for the ones that come from Secrets.
func plainEnv(env map[string]string) []string {
	var out []string
	for k, v := range env {
		if strings.HasPrefix(v, "secret:") {
			v = "from-a-secret"
			if k == "CORRAL_REDIS_URL" {
				v = "redis://redis:6379/0"
			}
		}
		out = append(out, k+"="+v)
	}
	return out
}

// TestChartRollsOnConfigChange: a changed tenants file changes the pod
// template's checksum annotation, so the Deployment rolls its pods onto
// the new file.
func TestChartRollsOnConfigChange(t *testing.T) {
	sum := func(args ...string) string {
		a := render(t, args...)["Deployment"].Spec.Template.Metadata.Annotations["checksum/config"]
		if len(a) != 64 {
			t.Fatalf("checksum/config annotation %q; want a sha256", a)
		}
		return a
	}
	base := sum()
	if again := sum(); again != base {
		t.Errorf("the same values give checksums %s and %s", base, again)
	}
	if changed := sum("--set", "tenants.tenants[0].id=team-b", "--set", "tenants.tenants[0].keys[0].sha256=2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"); changed == base {
		t.Error("a new tenant left the checksum unchanged; the pods would keep the old file")
	}
}

// TestChartRefusesReservedEnv: env may not set what the chart sets
// itself, so a value cannot silently lose to another.
func TestChartRefusesReservedEnv(t *testing.T) {
	_, err := helm(t, "template", "corral", chartPath(t, chart), "--set", "env.CORRAL_ADDR=:9999")
	if err == nil || !strings.Contains(err.Error(), "env.CORRAL_ADDR is set by the chart") {
		t.Errorf("helm template with env.CORRAL_ADDR = %v; want the chart's refusal", err)
	}
}

// TestChartSecretsAreReferences: a Redis URL with a password and the
// upstream key reach the pod only as Secret references; the chart renders
// no Secret and no key value of its own.
func TestChartSecretsAreReferences(t *testing.T) {
	objs := render(t, "--set", "redis.urlSecret.name=corral-redis", "--set", "upstream.apiKeySecret.name=corral-upstream",
		"--set", "redis.url=redis://ignored-when-the-secret-is-set:6379")
	if _, ok := objs["Secret"]; ok {
		t.Error("the chart renders a Secret; it must only refer to existing ones")
	}
	c := objs["Deployment"].Spec.Template.Spec.Containers[0]
	refs := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
		if e.Name == "CORRAL_REDIS_URL" && e.Value != nil {
			t.Errorf("CORRAL_REDIS_URL has a plain value %q beside its Secret", *e.Value)
		}
	}
	want := map[string]string{"CORRAL_REDIS_URL": "corral-redis/url", "CORRAL_UPSTREAM_API_KEY": "corral-upstream/api-key"}
	if fmt.Sprint(refs) != fmt.Sprint(want) {
		t.Errorf("secret references %v; want %v", refs, want)
	}
}

// TestChartNotesAskForDurableRedis: with an external Redis the notes ask
// for the persistence and eviction policy the durable state needs.
func TestChartNotesAskForDurableRedis(t *testing.T) {
	notes, err := os.ReadFile(filepath.Join(chart, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--appendonly yes", "--appendfsync everysec", "volatile-lru", "API tenants and keys"} {
		if !bytes.Contains(notes, []byte(want)) {
			t.Errorf("NOTES.txt does not say %q", want)
		}
	}
}

// TestChartNotesShowTheAdminAPI: with an admin token the notes show how
// to manage tenants and keys through the admin API, rotation included,
// with the subcommands as cmd/gateway parses them (flags before the
// tenant).
func TestChartNotesShowTheAdminAPI(t *testing.T) {
	notes, err := os.ReadFile(filepath.Join(chart, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CORRAL_ADMIN_URL", "CORRAL_ADMIN_TOKEN", "gateway tenants create -policy", "gateway keys create -name ci team-a", "gateway keys revoke team-a", "rotation"} {
		if !bytes.Contains(notes, []byte(want)) {
			t.Errorf("NOTES.txt does not say %q", want)
		}
	}
}

// TestChartNotesShowTheConsole: the notes give the console's URL and
// where its admin token is when the chart has one, and say how to turn
// it on when not; the default values keep the console's cookie setting
// off the pod (plain CORRAL_CONSOLE_SECURE_COOKIE default).
func TestChartNotesShowTheConsole(t *testing.T) {
	notes, err := os.ReadFile(filepath.Join(chart, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"/console/", ".Values.adminTokenSecret.name", "console.secureCookie=true", "set adminTokenSecret"} {
		if !bytes.Contains(notes, []byte(want)) {
			t.Errorf("NOTES.txt does not say %q", want)
		}
	}
	pod := render(t)["Deployment"].Spec.Template.Spec
	for _, e := range pod.Containers[0].Env {
		if e.Name == "CORRAL_CONSOLE_SECURE_COOKIE" {
			t.Errorf("the default values set %s; want it only with console.secureCookie", e.Name)
		}
	}
}
