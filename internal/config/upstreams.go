package config

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
)

// UpstreamsFile is the parsed upstreams file (CORRAL_UPSTREAMS_FILE).
type UpstreamsFile struct {
	Upstreams []UpstreamSpec `yaml:"upstreams"`
}

// UpstreamSpec is one upstream as the upstreams file declares it.
type UpstreamSpec struct {
	// Name is unique, [a-z0-9_-]{1,64}; X-Corral-Upstream and metrics show it.
	Name string `yaml:"name"`
	// URL is the base URL including its version path.
	URL string `yaml:"url"`
	// API is "openai" (default) or "anthropic".
	API string `yaml:"api"`
	// APIKeyEnv names the environment variable holding the key; keys never
	// sit in files. Absent = send no key (a local model).
	APIKeyEnv string `yaml:"api_key_env"`
	// Auth is bearer (openai default), api-key (Azure) or x-api-key
	// (anthropic default).
	Auth string `yaml:"auth"`
	// Models are globs of the model names it serves; absent = every model.
	Models []string `yaml:"models"`
	// Priority: lower is tried first; default 0.
	Priority int `yaml:"priority"`
	// Weight is its share of traffic within its priority; default 1.
	Weight *int `yaml:"weight"`
	// Timeout overrides CORRAL_UPSTREAM_TIMEOUT.
	Timeout *Duration `yaml:"timeout"`
	// Headers are extra headers sent upstream.
	Headers map[string]string `yaml:"headers"`
	// Provider is who runs the API: openai (api openai's default),
	// anthropic (api anthropic's default), azure, bedrock or vertex.
	Provider string `yaml:"provider"`
	// Region is the cloud region (bedrock, vertex).
	Region string `yaml:"region"`
	// Project is the Google Cloud project (vertex).
	Project string `yaml:"project"`
	// APIVersion set on an azure upstream selects Azure's classic API
	// ({url}/deployments/{id}/<path>?api-version=...).
	APIVersion string `yaml:"api_version"`
	// Aliases map client model globs to the provider's model id, in order;
	// the first match wins.
	Aliases yaml.MapSlice `yaml:"aliases"`
}

// Alias maps the client model names Glob matches to a provider's model
// id (an Azure deployment, a Bedrock model or inference profile id, a
// Vertex model version).
type Alias struct{ Glob, ID string }

// Upstream is one validated upstream, ready to build a client from. Its
// key is read from the environment at load time; it is never logged.
type Upstream struct {
	Name, URL, API, Auth string
	APIKey               string
	Models               []string
	Priority, Weight     int
	Timeout              Duration
	Headers              map[string]string
	// Provider is never empty: openai, anthropic, azure, bedrock or vertex.
	Provider        string
	Region, Project string
	APIVersion      string
	Aliases         []Alias
}

// Default upstream values.
const (
	APIOpenAI    = "openai"
	APIAnthropic = "anthropic"
	// The cloud providers (the provider field).
	ProviderAzure   = "azure"
	ProviderBedrock = "bedrock"
	ProviderVertex  = "vertex"
	// DefaultUpstream names the one upstream Corral has without a file.
	DefaultUpstream = "default"
)

var upstreamNamePattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// credentialHeaders may not be set as extra headers: credentials come only
// from api_key_env, so none sits in a file.
var credentialHeaders = map[string]bool{"Authorization": true, "Api-Key": true, "X-Api-Key": true}

// LoadUpstreams reads and validates the upstreams file at path; keys are
// read with getenv.
func LoadUpstreams(path string, getenv func(string) (string, bool)) ([]Upstream, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("upstreams file: %w", err)
	}
	return ParseUpstreams(path, data, getenv)
}

// ParseUpstreams parses and validates upstreams file content; name is used
// in error messages. Every mistake is reported with file, line and field.
func ParseUpstreams(name string, data []byte, getenv func(string) (string, bool)) ([]Upstream, error) {
	const kind = "upstreams file"
	var f UpstreamsFile
	if err := decodeFile(kind, name, "an upstreams: list (see the README's Several upstreams)", data, &f); err != nil {
		return nil, err
	}
	v := validator{kind: kind, name: name, data: data}
	if len(f.Upstreams) == 0 {
		v.fail("upstreams", "upstreams", "at least one upstream is required")
	}
	names := map[string]int{}
	out := make([]Upstream, 0, len(f.Upstreams))
	for i, u := range f.Upstreams {
		at := fmt.Sprintf("upstreams[%d]", i)
		up := Upstream{Name: u.Name, URL: u.URL, API: u.API, Auth: u.Auth, Models: u.Models, Priority: u.Priority, Weight: 1, Headers: u.Headers}
		switch {
		case !upstreamNamePattern.MatchString(u.Name):
			v.fail(at+".name", at+".name", "bad name %q: must match [a-z0-9_-]{1,64}", u.Name)
		case names[u.Name] > 0:
			v.fail(at+".name", at+".name", "duplicate name %q (also upstreams[%d])", u.Name, names[u.Name]-1)
		default:
			names[u.Name] = i + 1
		}
		switch u.API {
		case "":
			up.API = APIOpenAI
		case APIOpenAI, APIAnthropic:
		default:
			v.fail(at+".api", at+".api", "bad api %q: must be openai or anthropic", u.API)
		}
		v.provider(at, u, &up)
		if up.URL != "" {
			if pu, err := url.Parse(up.URL); err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") || pu.User != nil {
				v.fail(at+".url", at+".url", "must be an http(s) base URL such as https://api.openai.com/v1, with no credentials in it")
			}
		}
		if u.APIKeyEnv != "" {
			key, ok := getenv(u.APIKeyEnv)
			if !ok || key == "" {
				v.fail(at+".api_key_env", at+".api_key_env", "the environment variable %s is not set", u.APIKeyEnv)
			}
			up.APIKey = key
		}
		v.aliases(at, u.Aliases, &up)
		if u.Models == nil && up.Aliases != nil {
			// An upstream with aliases serves exactly its alias globs.
			for _, a := range up.Aliases {
				up.Models = append(up.Models, a.Glob)
			}
		}
		for j, g := range u.Models {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				gat := fmt.Sprintf("%s.models[%d]", at, j)
				v.fail(gat, gat, "bad glob %q", g)
			}
		}
		if u.Priority < 0 {
			v.fail(at+".priority", at+".priority", "must be 0 or more")
		}
		if u.Weight != nil {
			if *u.Weight < 1 {
				v.fail(at+".weight", at+".weight", "must be at least 1")
			}
			up.Weight = *u.Weight
		}
		v.duration(at+".timeout", u.Timeout)
		if u.Timeout != nil {
			up.Timeout = *u.Timeout
		}
		for h, val := range u.Headers {
			hat := at + ".headers." + h
			switch {
			case !headerName(h) || strings.ContainsAny(val, "\r\n\x00"):
				v.fail(at+".headers", hat, "not a valid HTTP header")
			case credentialHeaders[http.CanonicalHeaderKey(h)] || cloudHeader(h):
				v.fail(at+".headers", hat, "credentials go in api_key_env, never in the file")
			case strings.HasPrefix(http.CanonicalHeaderKey(h), "X-Corral-"):
				v.fail(at+".headers", hat, "X-Corral-* headers are Corral's own")
			}
		}
		out = append(out, up)
	}
	if err := errors.Join(v.errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// headerName reports whether h is an HTTP header name (an RFC 9110 token).
func headerName(h string) bool {
	if h == "" {
		return false
	}
	for _, c := range h {
		if c > 0x7e || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}
