package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestComposeMatchesConfig keeps docker-compose.yml honest without Docker:
// its services, ports and CORRAL_* names must match what Corral reads.
func TestComposeMatchesConfig(t *testing.T) {
	data, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Profiles    []string          `yaml:"profiles"`
			Ports       []string          `yaml:"ports"`
			Environment map[string]string `yaml:"environment"`
			Healthcheck *struct {
				Test []string `yaml:"test"`
			} `yaml:"healthcheck"`
			DependsOn map[string]struct {
				Condition string `yaml:"condition"`
			} `yaml:"depends_on"`
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	known := map[string]bool{}
	for f := range reflect.TypeFor[Config]().Fields() {
		known[f.Tag.Get("env")] = true
	}

	redis, ok := compose.Services["redis"]
	if !ok || redis.Healthcheck == nil {
		t.Fatal("compose needs a redis service with a healthcheck")
	}
	gw, ok := compose.Services["gateway"]
	if !ok {
		t.Fatal("compose needs a gateway service")
	}
	if gw.DependsOn["redis"].Condition != "service_healthy" {
		t.Error("gateway must depend on a healthy redis")
	}
	for k := range gw.Environment {
		if strings.HasPrefix(k, "CORRAL_") && !known[k] {
			t.Errorf("compose sets %s, which Corral does not read", k)
		}
	}
	if !strings.HasPrefix(gw.Environment["CORRAL_REDIS_URL"], "redis://redis:6379") {
		t.Errorf("gateway CORRAL_REDIS_URL = %q; want the redis service", gw.Environment["CORRAL_REDIS_URL"])
	}
	addr := gw.Environment["CORRAL_ADDR"]
	_, port, _ := strings.Cut(addr, ":")
	if len(gw.Ports) == 0 || !strings.HasSuffix(gw.Ports[0], ":"+port) {
		t.Errorf("gateway ports %v do not publish CORRAL_ADDR %q", gw.Ports, addr)
	}
	tf := gw.Environment["CORRAL_TENANTS_FILE"]
	mounted := false
	for _, v := range gw.Volumes {
		if src, dst, _ := strings.Cut(v, ":"); strings.HasPrefix(dst, tf) {
			mounted = true
			if _, err := LoadTenants("../../" + strings.TrimPrefix(src, "./")); err != nil {
				t.Errorf("mounted tenants file is invalid: %v", err)
			}
		}
	}
	if !mounted {
		t.Errorf("CORRAL_TENANTS_FILE %q is not mounted into the gateway", tf)
	}
	mock, ok := compose.Services["mockllm"]
	if !ok || len(mock.Profiles) != 1 || mock.Profiles[0] != "demo" {
		t.Error("compose needs a mockllm service under the demo profile")
	}
}
