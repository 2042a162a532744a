package helm

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/corralhq/corral/internal/config"
)

const clouds = "corral/values-clouds.yaml"

// cloudObjects is the part of the rendered objects the cloud-credential
// tests read: the ServiceAccount's annotations and what the pod runs as,
// is labelled with, and mounts.
type cloudObjects struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name        string            `yaml:"name"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	AutomountServiceAccountToken *bool             `yaml:"automountServiceAccountToken"`
	Data                         map[string]string `yaml:"data"`
	Spec                         struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				ServiceAccountName           string `yaml:"serviceAccountName"`
				AutomountServiceAccountToken *bool  `yaml:"automountServiceAccountToken"`
				Containers                   []struct {
					Env []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
						ReadOnly  bool   `yaml:"readOnly"`
					} `yaml:"volumeMounts"`
				} `yaml:"containers"`
				Volumes []struct {
					Name   string `yaml:"name"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// renderClouds runs helm template and indexes the objects by kind.
func renderClouds(t *testing.T, args ...string) map[string]cloudObjects {
	t.Helper()
	out, err := helm(t, append([]string{"template", "corral", chartPath(t, chart)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]cloudObjects{}
	for _, doc := range strings.Split(out, "\n---\n") {
		var o cloudObjects
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered chart is not YAML: %v\n%s", err, doc)
		}
		if o.Kind != "" {
			objs[o.Kind] = o
		}
	}
	return objs
}

func (o cloudObjects) env() map[string]string {
	m := map[string]string{}
	for _, e := range o.Spec.Template.Spec.Containers[0].Env {
		m[e.Name] = e.Value
	}
	return m
}

// TestChartCloudCredentials: values-clouds.yaml lints, makes a
// ServiceAccount carrying the three clouds' workload-identity annotations
// (IRSA, GKE, AKS), runs the pods as it with AKS's pod label, adds its
// extraEnv, and ships an upstreams file Corral accepts with one upstream
// per provider.
func TestChartCloudCredentials(t *testing.T) {
	if out, err := helm(t, "lint", "--strict", chartPath(t, chart), "-f", chartPath(t, clouds)); err != nil {
		t.Fatalf("helm lint values-clouds.yaml: %v\n%s", err, out)
	}
	objs := renderClouds(t, "-f", chartPath(t, clouds))
	sa, ok := objs["ServiceAccount"]
	if !ok {
		t.Fatal("no ServiceAccount rendered with serviceAccount.create")
	}
	want := map[string]string{
		"eks.amazonaws.com/role-arn":        "arn:aws:iam::123456789012:role/corral-bedrock",
		"iam.gke.io/gcp-service-account":    "corral@acme-ml.iam.gserviceaccount.com",
		"azure.workload.identity/client-id": "00000000-0000-0000-0000-000000000000",
	}
	if !maps.Equal(sa.Metadata.Annotations, want) {
		t.Errorf("ServiceAccount annotations %v; want %v", sa.Metadata.Annotations, want)
	}
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Error("the ServiceAccount mounts its token; Corral never calls the Kubernetes API")
	}
	pod := objs["Deployment"].Spec.Template
	if pod.Spec.ServiceAccountName != sa.Metadata.Name || sa.Metadata.Name == "" {
		t.Errorf("the pods run as %q; want the chart's ServiceAccount %q", pod.Spec.ServiceAccountName, sa.Metadata.Name)
	}
	if pod.Metadata.Labels["azure.workload.identity/use"] != "true" {
		t.Errorf("pod labels %v; want azure.workload.identity/use: \"true\" for AKS workload identity", pod.Metadata.Labels)
	}
	if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Error("the pods mount the service-account token")
	}
	if env := objs["Deployment"].env(); env["AWS_REGION"] != "us-east-1" {
		t.Errorf("extraEnv AWS_REGION = %q; want us-east-1", env["AWS_REGION"])
	}
	// The upstreams file, as the pod reads it, is valid.
	path := filepath.Join(t.TempDir(), "upstreams.yaml")
	if err := os.WriteFile(path, []byte(objs["ConfigMap"].Data["upstreams.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	ups, err := config.LoadUpstreams(path, func(k string) (string, bool) { return "sk-test", k == "ANTHROPIC_KEY" })
	if err != nil {
		t.Fatalf("values-clouds.yaml's upstreams file: %v", err)
	}
	var providers []string
	for _, u := range ups {
		providers = append(providers, u.Provider)
	}
	if want := []string{"anthropic", config.ProviderBedrock, config.ProviderVertex, config.ProviderAzure}; !slices.Equal(providers, want) {
		t.Errorf("providers %v; want %v", providers, want)
	}

	// The defaults make no ServiceAccount and name none.
	def := renderClouds(t)
	if _, ok := def["ServiceAccount"]; ok {
		t.Error("the default values render a ServiceAccount")
	}
	if n := def["Deployment"].Spec.Template.Spec.ServiceAccountName; n != "" {
		t.Errorf("the default pods run as %q; want the namespace's default", n)
	}
	// An account of the operator's own is named, not made.
	own := renderClouds(t, "--set", "serviceAccount.name=corral-irsa")
	if _, ok := own["ServiceAccount"]; ok || own["Deployment"].Spec.Template.Spec.ServiceAccountName != "corral-irsa" {
		t.Errorf("serviceAccount.name without create: made %v, pods run as %q; want none made and corral-irsa", ok, own["Deployment"].Spec.Template.Spec.ServiceAccountName)
	}
}

// TestChartGoogleCredentialsFromSecret: a service-account key in a Secret
// is mounted read-only and named by GOOGLE_APPLICATION_CREDENTIALS; the
// chart renders no Secret of its own, and GOOGLE_APPLICATION_CREDENTIALS
// cannot be set twice.
func TestChartGoogleCredentialsFromSecret(t *testing.T) {
	objs := renderClouds(t, "--set", "googleCredentials.secretName=corral-vertex")
	if _, ok := objs["Secret"]; ok {
		t.Error("the chart renders a Secret")
	}
	dep := objs["Deployment"]
	if got := dep.env()["GOOGLE_APPLICATION_CREDENTIALS"]; got != "/var/run/secrets/google/credentials.json" {
		t.Errorf("GOOGLE_APPLICATION_CREDENTIALS = %q; want /var/run/secrets/google/credentials.json", got)
	}
	var secret string
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "google-credentials" && v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	if secret != "corral-vertex" {
		t.Errorf("google-credentials volume from Secret %q; want corral-vertex", secret)
	}
	mounted := false
	for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.Name == "google-credentials" && m.MountPath == "/var/run/secrets/google" && m.ReadOnly)
	}
	if !mounted {
		t.Error("google-credentials is not mounted read-only at /var/run/secrets/google")
	}
	if _, ok := renderClouds(t)["Deployment"].env()["GOOGLE_APPLICATION_CREDENTIALS"]; ok {
		t.Error("GOOGLE_APPLICATION_CREDENTIALS set without googleCredentials")
	}
	tests := []struct{ give, want string }{
		{give: "extraEnv[0].name=CORRAL_ADMIN_TOKEN", want: "extraEnv CORRAL_ADMIN_TOKEN is set by the chart"},
		{give: "extraEnv[0].name=GOOGLE_APPLICATION_CREDENTIALS", want: "extraEnv GOOGLE_APPLICATION_CREDENTIALS is set by the chart"},
	}
	for _, tt := range tests {
		_, err := helm(t, "template", "corral", chartPath(t, chart), "--set", "googleCredentials.secretName=corral-vertex", "--set", tt.give, "--set", "extraEnv[0].value=x")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("--set %s: %v; want the chart's refusal %q", tt.give, err, tt.want)
		}
	}
}
