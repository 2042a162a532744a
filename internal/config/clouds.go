package config

import (
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"
)

// The auth styles of the cloud providers.
const (
	// AuthSigV4 signs Bedrock calls with AWS's default credential chain.
	AuthSigV4 = "sigv4"
	// AuthEntra sends a Microsoft Entra ID token (azidentity's default chain).
	AuthEntra = "entra"
	// AuthGoogle sends an OAuth2 token from Google's application default
	// credentials (Vertex AI's only style).
	AuthGoogle = "google"
)

// cloudRegion is a region or location name as AWS and Google spell them.
var cloudRegion = regexp.MustCompile(`^[a-z0-9-]{1,40}$`)

// gcpProject is a Google Cloud project id (or number).
var gcpProject = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// azureAPIVersion is a dated Azure OpenAI API version ("2024-10-21",
// "2025-04-01-preview").
var azureAPIVersion = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(-preview)?$`)

// provider validates u's provider and the fields that go with it, and
// fills up's Provider, URL, Auth, Region, Project and APIVersion with the
// documented defaults.
func (v *validator) provider(at string, u UpstreamSpec, up *Upstream) {
	up.Provider = u.Provider
	if up.Provider == "" {
		up.Provider = up.API
	}
	only := func(field, value, providers string) {
		if value != "" {
			v.fail(at+"."+field, at+"."+field, "%s is for provider %s only", field, providers)
		}
	}
	needURL := func() {
		if u.URL == "" {
			v.fail(at+".url", at+".url", "is required for provider %s", up.Provider)
		}
	}
	auth := func(def string, allowed ...string) {
		up.Auth = u.Auth
		if up.Auth == "" {
			up.Auth = def
		}
		for _, a := range allowed {
			if a == up.Auth {
				return
			}
		}
		v.fail(at+".auth", at+".auth", "bad auth %q: provider %s takes %s", u.Auth, up.Provider, strings.Join(allowed, " or "))
	}
	// keyed says whether the auth style reads api_key_env, which the
	// chains' styles (sigv4, entra, google) never do.
	keyed := func(need bool) {
		switch {
		case need && u.APIKeyEnv == "":
			v.fail(at+".api_key_env", at+".api_key_env", "auth %s needs api_key_env (the name of the variable holding the key)", up.Auth)
		case !need && u.APIKeyEnv != "":
			v.fail(at+".api_key_env", at+".api_key_env", "auth %s takes its credentials from the cloud's own chain, not from api_key_env", up.Auth)
		}
	}
	wantAPI := func(apis ...string) {
		for _, a := range apis {
			if a == up.API {
				return
			}
		}
		v.fail(at+".provider", at+".provider", "provider %s serves api %s, not %s", up.Provider, strings.Join(apis, " or "), up.API)
	}
	region := func() {
		switch {
		case u.Region == "":
			v.fail(at+".region", at+".region", "is required for provider %s", up.Provider)
		case !cloudRegion.MatchString(u.Region):
			v.fail(at+".region", at+".region", "bad region %q", u.Region)
		}
	}
	up.Region, up.Project, up.APIVersion = u.Region, u.Project, u.APIVersion
	if up.Provider != ProviderAzure {
		only("api_version", u.APIVersion, ProviderAzure)
	}
	if up.Provider != ProviderVertex {
		only("project", u.Project, ProviderVertex)
	}
	if up.Provider != ProviderBedrock && up.Provider != ProviderVertex {
		only("region", u.Region, "bedrock or vertex")
	}
	switch up.Provider {
	case APIOpenAI, APIAnthropic:
		wantAPI(up.Provider)
		needURL()
		def := "bearer"
		if up.API == APIAnthropic {
			def = "x-api-key"
		}
		auth(def, "bearer", "api-key", "x-api-key")
	case ProviderAzure:
		wantAPI(APIOpenAI)
		needURL()
		auth("api-key", "api-key", AuthEntra)
		keyed(up.Auth == "api-key")
		if u.APIVersion != "" && !azureAPIVersion.MatchString(u.APIVersion) {
			v.fail(at+".api_version", at+".api_version", "bad api_version %q: want a dated version such as 2024-10-21", u.APIVersion)
		}
	case ProviderBedrock:
		wantAPI(APIAnthropic, APIOpenAI)
		region()
		auth(AuthSigV4, AuthSigV4, "bearer")
		keyed(up.Auth == "bearer")
		if up.URL == "" && cloudRegion.MatchString(u.Region) {
			up.URL = "https://bedrock-runtime." + u.Region + ".amazonaws.com"
		}
	case ProviderVertex:
		wantAPI(APIAnthropic, APIOpenAI)
		region()
		auth(AuthGoogle, AuthGoogle)
		keyed(false)
		switch {
		case u.Project == "":
			v.fail(at+".project", at+".project", "is required for provider vertex")
		case !gcpProject.MatchString(u.Project):
			v.fail(at+".project", at+".project", "bad project %q", u.Project)
		}
		if up.URL == "" && cloudRegion.MatchString(u.Region) {
			up.URL = VertexURL(u.Region)
		}
	default:
		v.fail(at+".provider", at+".provider", "bad provider %q: must be openai, anthropic, azure, bedrock or vertex", u.Provider)
	}
}

// VertexURL is Vertex AI's endpoint for region, as Google's SDKs build it:
// the global endpoint, a multi-region's (us, eu) or a region's own.
func VertexURL(region string) string {
	switch region {
	case "global":
		return "https://aiplatform.googleapis.com"
	case "us", "eu":
		return "https://aiplatform." + region + ".rep.googleapis.com"
	}
	return "https://" + region + "-aiplatform.googleapis.com"
}

// aliases validates the aliases map (glob: provider model id) into up's
// ordered list.
func (v *validator) aliases(at string, ms yaml.MapSlice, up *Upstream) {
	for _, it := range ms {
		glob, gok := it.Key.(string)
		id, iok := it.Value.(string)
		aat := fmt.Sprintf("%s.aliases.%v", at, it.Key)
		if _, err := path.Match(glob, ""); !gok || err != nil || glob == "" {
			v.fail(at+".aliases", aat, "bad glob %v", it.Key)
			continue
		}
		if !iok || id == "" || strings.ContainsAny(id, "\x00\r\n") {
			v.fail(at+".aliases", aat, "want the provider's model id as a string")
			continue
		}
		up.Aliases = append(up.Aliases, Alias{Glob: glob, ID: id})
	}
}

// cloudHeader reports whether h is a header the clouds read as a
// credential or a signed request field: never in a file.
func cloudHeader(h string) bool {
	k := http.CanonicalHeaderKey(h)
	return strings.HasPrefix(k, "X-Amz-") || k == "X-Goog-Api-Key" || k == "X-Goog-User-Project"
}
