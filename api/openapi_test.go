package api

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// doc parses the embedded document into generic YAML values.
func doc(t *testing.T) map[string]any {
	t.Helper()
	var d map[string]any
	if err := yaml.Unmarshal(OpenAPI, &d); err != nil {
		t.Fatalf("openapi.yaml does not parse: %v", err)
	}
	return d
}

// get walks m along keys, failing the test when a step is missing.
func get(t *testing.T, v any, keys ...string) any {
	t.Helper()
	for i, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: not a mapping", strings.Join(keys[:i], "."))
		}
		v, ok = m[k]
		if !ok {
			t.Fatalf("%s: missing", strings.Join(keys[:i+1], "."))
		}
	}
	return v
}

func mapping(t *testing.T, v any, keys ...string) map[string]any {
	t.Helper()
	m, ok := get(t, v, keys...).(map[string]any)
	if !ok {
		t.Fatalf("%s: not a mapping", strings.Join(keys, "."))
	}
	return m
}

// resolve follows a local "$ref" ("#/components/...") if v is one.
func resolve(t *testing.T, d map[string]any, v any) any {
	t.Helper()
	for range 10 {
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return v
		}
		if !strings.HasPrefix(ref, "#/") {
			t.Fatalf("non-local $ref %q", ref)
		}
		v = get(t, d, strings.Split(strings.TrimPrefix(ref, "#/"), "/")...)
	}
	t.Fatal("$ref chain too long")
	return nil
}

func TestEmbeddedMatchesFile(t *testing.T) {
	b, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(OpenAPI) == 0 || !bytes.Equal(b, OpenAPI) {
		t.Fatal("OpenAPI does not embed openapi.yaml")
	}
}

func TestVersion(t *testing.T) {
	d := doc(t)
	v, _ := get(t, d, "openapi").(string)
	if !strings.HasPrefix(v, "3.") {
		t.Fatalf("openapi = %q, want 3.x", v)
	}
	for _, k := range []string{"title", "version"} {
		if s, _ := get(t, d, "info", k).(string); s == "" {
			t.Errorf("info.%s is empty", k)
		}
	}
}

func TestPaths(t *testing.T) {
	d := doc(t)
	want := map[string][]string{
		"/v1/chat/completions":              {"post"},
		"/v1/completions":                   {"post"},
		"/v1/embeddings":                    {"post"},
		"/v1/models":                        {"get"},
		"/v1/{path}":                        {"get", "post", "put", "patch", "delete"},
		"/healthz":                          {"get"},
		"/readyz":                           {"get"},
		"/metrics":                          {"get"},
		"/admin/tenants/{id}/usage":         {"get"},
		"/admin/cache/{tenant}":             {"delete"},
		"/admin/cache/{tenant}/{key}":       {"delete"},
		"/admin/reload":                     {"post"},
		"/admin/tenants":                    {"get", "post"},
		"/admin/tenants/{id}":               {"get", "patch", "delete"},
		"/admin/tenants/{id}/keys":          {"get", "post"},
		"/admin/tenants/{id}/keys/{key_id}": {"delete"},
		"/admin/audit":                      {"get"},
	}
	paths := mapping(t, d, "paths")
	for p, methods := range want {
		for _, m := range methods {
			op, ok := mapping(t, paths, p)[m]
			if !ok {
				t.Errorf("%s %s: missing", strings.ToUpper(m), p)
				continue
			}
			if _, ok := op.(map[string]any)["responses"]; !ok {
				t.Errorf("%s %s: no responses", strings.ToUpper(m), p)
			}
		}
	}
}

// TestModelEndpoints checks what the design promises of the three cached
// endpoints: JSON and SSE answers, the request controls, the failure
// classification table and the passed-through upstream statuses.
func TestModelEndpoints(t *testing.T) {
	d := doc(t)
	for _, p := range []string{"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/responses"} {
		op := mapping(t, d, "paths", p, "post")
		ok200 := resolve(t, d, get(t, op, "responses", "200"))
		content := mapping(t, ok200, "content")
		for _, ct := range []string{"application/json", "text/event-stream"} {
			if _, ok := content[ct]; !ok {
				t.Errorf("%s 200: no %s", p, ct)
			}
		}
		var params []string
		for _, prm := range get(t, op, "parameters").([]any) {
			params = append(params, get(t, resolve(t, d, prm), "name").(string))
		}
		for _, h := range []string{"Cache-Control", "X-Corral-Cache-TTL", "X-Request-Id"} {
			if !slices.Contains(params, h) {
				t.Errorf("%s: request header %s not a parameter", p, h)
			}
		}
		responses := mapping(t, op, "responses")
		for _, s := range []string{"400", "401", "403", "404", "408", "409", "413", "422", "429", "500", "502", "504", "5XX"} {
			if _, ok := responses[s]; !ok {
				t.Errorf("%s: no %s response", p, s)
			}
		}
		desc, _ := get(t, op, "description").(string)
		for _, s := range []string{"Failure classification", "upstream_auth_error", "upstream_timeout", "CORRAL_NEGATIVE_TTL", "408, 409, 5xx", "| 429 | nothing | Corral's own 429"} {
			if !strings.Contains(desc, s) {
				t.Errorf("%s: description lacks %q", p, s)
			}
		}
		schema := resolve(t, d, get(t, op, "requestBody", "content", "application/json", "schema"))
		if !strings.Contains(string(mustMarshal(t, schema)), "additionalProperties: true") {
			t.Errorf("%s: request schema does not allow unknown fields", p)
		}
	}
	base := mapping(t, d, "components", "schemas", "ModelRequestBase")
	if req, _ := base["required"].([]any); !slices.Contains(req, any("model")) {
		t.Error("ModelRequestBase: model is not required")
	}
	props := mapping(t, base, "properties")
	for _, f := range []string{"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "n"} {
		if _, ok := props[f]; !ok {
			t.Errorf("ModelRequestBase: no %s", f)
		}
	}
	get(t, base, "properties", "stream_options")
	get(t, d, "components", "schemas", "StreamOptions", "properties", "include_usage")
	get(t, d, "components", "schemas", "ChatCompletionRequest")
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCacheHeaderEnum(t *testing.T) {
	d := doc(t)
	enum, _ := get(t, d, "components", "headers", "X-Corral-Cache", "schema", "enum").([]any)
	var got []string
	for _, v := range enum {
		s, _ := v.(string)
		got = append(got, s)
	}
	want := []string{"BYPASS", "COALESCED", "HIT", "MISS", "NEGATIVE", "STALE"}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("X-Corral-Cache enum = %v, want %v", got, want)
	}
}

func TestResponseHeaders(t *testing.T) {
	d := doc(t)
	headers := mapping(t, d, "components", "headers")
	names := []string{
		"X-Corral-Cache", "Cache-Status", "Age", "X-Request-Id",
		"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
		"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
		"Retry-After", "retry-after-ms",
	}
	for _, n := range names {
		h, ok := headers[n].(map[string]any)
		if !ok {
			t.Errorf("components.headers.%s: missing", n)
			continue
		}
		if _, ok := h["schema"]; !ok {
			t.Errorf("components.headers.%s: no schema", n)
		}
	}
	// The success of a model call carries the cache and rate-limit headers;
	// every 429 carries Retry-After and retry-after-ms.
	success := mapping(t, d, "components", "responses", "ModelSuccess", "headers")
	for _, n := range names[:10] {
		if _, ok := success[n]; !ok {
			t.Errorf("ModelSuccess: no %s header", n)
		}
	}
	tooMany := mapping(t, d, "components", "responses", "TooManyRequests", "headers")
	for _, n := range []string{"Retry-After", "retry-after-ms"} {
		if _, ok := tooMany[n]; !ok {
			t.Errorf("TooManyRequests: no %s header", n)
		}
	}
	// Corral's own errors that a retry cannot change say so.
	if _, ok := headers["x-should-retry"].(map[string]any); !ok {
		t.Error("components.headers.x-should-retry: missing")
	}
	for _, r := range []string{"BadRequest", "Unauthorized", "ModelNotAllowed", "AdminNotFound", "AdminUnauthorized", "MethodNotAllowed", "RequestTooLarge"} {
		if _, ok := mapping(t, d, "components", "responses", r, "headers")["x-should-retry"]; !ok {
			t.Errorf("%s: no x-should-retry header", r)
		}
	}
	if _, ok := tooMany["x-should-retry"]; ok {
		t.Error("TooManyRequests: a 429 must not say x-should-retry")
	}
	for _, ex := range []string{"corral; hit; ttl=3512", "corral; fwd=miss; stored", "corral; fwd=miss; collapsed", "corral; fwd=bypass"} {
		if !bytes.Contains(OpenAPI, []byte(ex)) {
			t.Errorf("Cache-Status example %q missing", ex)
		}
	}
}

// TestErrorCodes checks that each error code is shown, in an example body,
// on a response with the status Corral answers it with.
func TestErrorCodes(t *testing.T) {
	d := doc(t)
	want := map[string]string{
		"invalid_request_error":       "400",
		"invalid_api_key":             "401",
		"model_not_allowed":           "403",
		"model_not_found":             "404",
		"method_not_allowed":          "405",
		"request_too_large":           "413",
		"rate_limit_exceeded":         "429",
		"tenant_concurrency_exceeded": "429",
		"internal_error":              "500",
		"upstream_auth_error":         "502",
		"upstream_error":              "502",
		"upstream_timeout":            "504",
		"stored_objects_disabled":     "403",
		"not_found":                   "404",
		"ownership_unavailable":       "503",
		"tenant_exists":               "409",
		"tenant_managed_by_file":      "409",
		"tenant_store_unavailable":    "503",
		"too_many_attempts":           "429",
	}
	seen := map[string]map[string]bool{} // code → statuses
	for _, item := range mapping(t, d, "paths") {
		for _, op := range item.(map[string]any) {
			opm, ok := op.(map[string]any)
			if !ok {
				continue
			}
			responses, _ := opm["responses"].(map[string]any)
			for status, r := range responses {
				for _, c := range codes(resolve(t, d, r)) {
					if seen[c] == nil {
						seen[c] = map[string]bool{}
					}
					seen[c][status] = true
				}
			}
		}
	}
	for code, status := range want {
		if !seen[code][status] {
			t.Errorf("code %s: no %s response shows it (seen on %v)", code, status, seen[code])
		}
		if !bytes.Contains(OpenAPI, []byte(code)) {
			t.Errorf("code %s: not in the document", code)
		}
	}
	e := mapping(t, d, "components", "schemas", "Error")
	req, _ := e["required"].([]any)
	for _, f := range []string{"message", "type", "param", "code"} {
		if !slices.Contains(req, any(f)) {
			t.Errorf("Error: %s not required", f)
		}
	}
	if typ, _ := get(t, e, "properties", "param", "type").([]any); !slices.Contains(typ, any("null")) {
		t.Error("Error.param is not nullable")
	}
}

// codes collects the string values of "code" keys under v (the examples of
// error bodies).
func codes(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && k == "code" {
				out = append(out, s)
				continue
			}
			out = append(out, codes(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, codes(x)...)
		}
	}
	return out
}

func TestSecuritySchemes(t *testing.T) {
	d := doc(t)
	s := mapping(t, d, "components", "securitySchemes")
	var bearer, apiKey bool
	for _, v := range s {
		m := v.(map[string]any)
		if m["type"] == "http" && strings.EqualFold(m["scheme"].(string), "bearer") {
			bearer = true
		}
		if m["type"] == "apiKey" && m["in"] == "header" && m["name"] == "api-key" {
			apiKey = true
		}
	}
	if !bearer || !apiKey {
		t.Fatalf("bearer scheme %v, api-key header scheme %v; want both", bearer, apiKey)
	}
}

// TestRefsResolve checks that every local $ref points at something.
func TestRefsResolve(t *testing.T) {
	d := doc(t)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["$ref"]; ok {
				resolve(t, d, v)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(d)
}

// TestAdminEndpoints checks the admin endpoints and /metrics against what
// internal/server serves: no "planned" wording left, the usage schema has
// exactly the fields handleUsage writes, and the admin error codes.
func TestAdminEndpoints(t *testing.T) {
	d := doc(t)
	for _, s := range []string{"(planned)", "Planned."} {
		if bytes.Contains(OpenAPI, []byte(s)) {
			t.Errorf("document still says %q", s)
		}
	}

	// TenantUsage's properties are the JSON fields of handleUsage's answer.
	want := usageFields(t)
	usage := mapping(t, d, "components", "schemas", "TenantUsage")
	var got []string
	for k := range mapping(t, usage, "properties") {
		got = append(got, k)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("TenantUsage properties = %v; handleUsage writes %v", got, want)
	}
	var required []string
	for _, r := range get(t, usage, "required").([]any) {
		required = append(required, r.(string))
	}
	sort.Strings(required)
	if !slices.Equal(required, want) {
		t.Errorf("TenantUsage required = %v; want %v", required, want)
	}
	var cache []string
	for k := range mapping(t, usage, "properties", "cache", "properties") {
		cache = append(cache, k)
	}
	sort.Strings(cache)
	if !slices.Equal(cache, []string{"BYPASS", "COALESCED", "HIT", "NEGATIVE", "STALE"}) {
		t.Errorf("TenantUsage.cache properties = %v", cache)
	}

	purged := resolve(t, d, get(t, d, "paths", "/admin/cache/{tenant}", "delete", "responses", "200"))
	get(t, purged, "content", "application/json", "schema", "properties", "deleted")
	get(t, d, "paths", "/admin/reload", "post", "responses", "200", "content", "application/json", "schema", "properties", "tenants")

	// Every admin operation and /metrics answers a wrong token with 401
	// invalid_api_key.
	ops := map[string]string{
		"/metrics": "get", "/admin/tenants/{id}/usage": "get", "/admin/cache/{tenant}": "delete",
		"/admin/cache/{tenant}/{key}": "delete", "/admin/reload": "post",
	}
	for p, m := range ops {
		r := resolve(t, d, get(t, d, "paths", p, m, "responses", "401"))
		if c := codes(r); !slices.Equal(c, []string{"invalid_api_key"}) {
			t.Errorf("%s %s 401 shows codes %v; want invalid_api_key", strings.ToUpper(m), p, c)
		}
		// and an address locked out for guessing with 429, saying when.
		r = resolve(t, d, get(t, d, "paths", p, m, "responses", "429"))
		if c := codes(r); !slices.Equal(c, []string{"too_many_attempts"}) {
			t.Errorf("%s %s 429 shows codes %v; want too_many_attempts", strings.ToUpper(m), p, c)
		}
		get(t, r, "headers", "Retry-After")
		get(t, r, "headers", "retry-after-ms")
		var schemes []string
		for _, s := range get(t, d, "paths", p, m, "security").([]any) {
			for k := range s.(map[string]any) {
				schemes = append(schemes, k)
			}
		}
		if !slices.Contains(schemes, "adminBearer") {
			t.Errorf("%s %s: security %v lacks adminBearer", strings.ToUpper(m), p, schemes)
		}
	}
	// /metrics is open when no admin token is set.
	if sec := get(t, d, "paths", "/metrics", "get", "security").([]any); !slices.ContainsFunc(sec, func(s any) bool {
		m, ok := s.(map[string]any)
		return ok && len(m) == 0
	}) {
		t.Error("/metrics: security has no empty requirement (open without CORRAL_ADMIN_TOKEN)")
	}
	for status, code := range map[string]string{"503": "usage_unavailable"} {
		r := resolve(t, d, get(t, d, "paths", "/admin/tenants/{id}/usage", "get", "responses", status))
		if !slices.Contains(codes(r), code) {
			t.Errorf("usage %s does not show %s", status, code)
		}
	}
	r := resolve(t, d, get(t, d, "paths", "/admin/cache/{tenant}", "delete", "responses", "503"))
	if !slices.Contains(codes(r), "purge_failed") {
		t.Error("purge 503 does not show purge_failed")
	}
	r = resolve(t, d, get(t, d, "paths", "/admin/reload", "post", "responses", "400"))
	if !slices.Contains(codes(r), "invalid_request_error") {
		t.Error("reload 400 does not show invalid_request_error")
	}
}

// usageFields reads the JSON field names of the usage answer from
// internal/server/admin.go: "tenant" and the tags of usageJSON.
func usageFields(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../internal/server/admin.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	fields := []string{"tenant"}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "usageJSON" {
			return true
		}
		for _, fd := range ts.Type.(*ast.StructType).Fields.List {
			if fd.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(fd.Tag.Value)
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if name != "" && name != "-" {
				fields = append(fields, name)
			}
		}
		return false
	})
	if len(fields) < 5 {
		t.Fatalf("found usage fields %v in admin.go; has usageJSON moved?", fields)
	}
	sort.Strings(fields)
	return fields
}
