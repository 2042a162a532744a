package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/failover"
)

// TestUpstreamHeaders: the headers naming the answering upstream and its
// provider are documented under the names failover sets, on a model
// call's success, and the provider's values are the upstreams file's.
func TestUpstreamHeaders(t *testing.T) {
	d := doc(t)
	headers := mapping(t, d, "components", "headers")
	success := mapping(t, d, "components", "responses", "ModelSuccess", "headers")
	for _, n := range []string{failover.UpstreamHeader, failover.ProviderHeader} {
		if _, ok := headers[n].(map[string]any); !ok {
			t.Errorf("components.headers.%s: missing", n)
		}
		if _, ok := success[n]; !ok {
			t.Errorf("ModelSuccess: no %s header", n)
		}
	}
	want := []string{config.APIOpenAI, config.APIAnthropic, config.ProviderAzure, config.ProviderBedrock, config.ProviderVertex}
	sort.Strings(want)
	if got := enum(t, get(t, headers, failover.ProviderHeader, "schema", "enum")); !slices.Equal(got, want) {
		t.Errorf("X-Corral-Provider enum = %v; want the providers %v", got, want)
	}
	item := mapping(t, d, "components", "schemas", "Readiness", "properties", "upstreams", "items")
	if got := enum(t, get(t, item, "properties", "provider", "enum")); !slices.Equal(got, want) {
		t.Errorf("Readiness.upstreams provider enum = %v; want %v", got, want)
	}
	var props []string
	for k := range mapping(t, item, "properties") {
		props = append(props, k)
	}
	sort.Strings(props)
	if fields := readyUpstreamFields(t); !slices.Equal(props, fields) {
		t.Errorf("Readiness.upstreams items = %v; cmd/gateway's readyUpstream has %v", props, fields)
	}
}

// enum reads a YAML list of strings, sorted.
func enum(t *testing.T, v any) []string {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("%v is not a list", v)
	}
	out := make([]string, len(l))
	for i, e := range l {
		out[i], _ = e.(string)
	}
	sort.Strings(out)
	return out
}

// readyUpstreamFields reads the JSON field names of /readyz's upstreams
// from cmd/gateway/upstreams.go: the tags of readyUpstream, sorted.
func readyUpstreamFields(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../cmd/gateway/upstreams.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "readyUpstream" {
			return true
		}
		for _, fd := range ts.Type.(*ast.StructType).Fields.List {
			if fd.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(fd.Tag.Value)
			if name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ","); name != "" && name != "-" {
				fields = append(fields, name)
			}
		}
		return false
	})
	if len(fields) == 0 {
		t.Fatal("no readyUpstream in cmd/gateway/upstreams.go; has it moved?")
	}
	sort.Strings(fields)
	return fields
}
