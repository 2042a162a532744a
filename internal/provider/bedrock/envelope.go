package bedrock

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/upstream"
)

// DefaultAnthropicVersion is the body's anthropic_version when the client
// sent neither the header nor the field: the one version Bedrock's Claude
// documents.
const DefaultAnthropicVersion = "bedrock-2023-05-31"

// envelope is req as Bedrock takes it for the provider's model id: its
// path, headers and body. stream says the answer is an event stream.
func (c *Client) envelope(req upstream.Request, id string) (out upstream.Request, stream bool, err error) {
	out = req
	out.RawQuery = provider.SDKQuery(req.RawQuery)
	out.Header = forwardable(req.Header)
	out.Header.Set("Content-Type", "application/json")
	if c.o.API == provider.OpenAI {
		out.Path = "/openai/v1" + req.Path
		out.RawPath = ""
		out.Body, err = provider.SetString(req.Body, "model", id)
		return out, false, err
	}
	// InvokeModel's Accept is the answer's media type; anthropic-sdk-go
	// sends application/json for the stream too (its frames' payloads).
	out.Header.Set("Accept", "application/json")
	out.Body, stream, err = anthropicBody(req.Body, req.Header, out.Header)
	if err != nil {
		return out, false, err
	}
	if id == "" {
		return out, false, errors.New("bedrock: missing required model parameter")
	}
	if !provider.PathSegment(id) {
		return out, false, errors.New("bedrock: model " + id + " is not a path segment")
	}
	op := "/invoke"
	if stream {
		op = "/invoke-with-response-stream"
	}
	out.Path = "/model/" + id + op
	out.RawPath = "/model/" + escapeSegment(id) + op
	return out, stream, nil
}

// anthropicBody applies anthropic-sdk-go's bedrock middleware to a
// Messages body: anthropic-version (hdr) becomes anthropic_version unless
// the body has one (DefaultAnthropicVersion when the client sent none),
// anthropic-beta values become the anthropic_beta array,
// anthropic-user-profile-id becomes user_profile_id unless present, and
// model and stream leave the body. out is the outgoing header, from which
// what moved into the body is removed. Each edit is surgical (provider's
// SetRaw and Delete): every other byte is the client's.
func anthropicBody(body []byte, hdr, out http.Header) (_ []byte, stream bool, err error) {
	if !gjson.ValidBytes(body) {
		return nil, false, errors.New("bedrock: the request body is not JSON")
	}
	version := hdr.Get("Anthropic-Version")
	out.Del("Anthropic-Version")
	if !provider.Field(body, "anthropic_version").Exists() {
		if version == "" {
			version = DefaultAnthropicVersion
		}
		if body, err = provider.SetString(body, "anthropic_version", version); err != nil {
			return nil, false, err
		}
	}
	if vv := hdr.Values("Anthropic-Beta"); len(vv) > 0 {
		out.Del("Anthropic-Beta")
		var betas []string
		for _, v := range vv {
			for b := range strings.SplitSeq(v, ",") {
				if b = strings.TrimSpace(b); b != "" {
					betas = append(betas, b)
				}
			}
		}
		if len(betas) > 0 {
			raw, _ := json.Marshal(betas)
			if body, err = provider.SetRaw(body, "anthropic_beta", raw); err != nil {
				return nil, false, err
			}
		}
	}
	if p := hdr.Get("Anthropic-User-Profile-Id"); p != "" {
		out.Del("Anthropic-User-Profile-Id")
		if !provider.Field(body, "user_profile_id").Exists() {
			if body, err = provider.SetString(body, "user_profile_id", p); err != nil {
				return nil, false, err
			}
		}
	}
	stream = provider.Field(body, "stream").Bool()
	if body, err = provider.Delete(body, "model"); err != nil {
		return nil, false, err
	}
	if body, err = provider.Delete(body, "stream"); err != nil {
		return nil, false, err
	}
	return body, stream, nil
}

// forwardable is a copy of the client's header without what Bedrock
// would read as Corral's credentials or signed request fields (X-Amz-*:
// a client's X-Amz-Security-Token or X-Amz-Date would sit inside Corral's
// signature) or as settings of Corral's account (X-Amzn-Bedrock-*:
// guardrails, service tier, trace). upstream.Client drops the client's own
// keys and hop-by-hop headers itself.
func forwardable(h http.Header) http.Header {
	out := make(http.Header, len(h)+2)
	for k, vv := range h {
		if strings.HasPrefix(k, "X-Amz-") || strings.HasPrefix(k, "X-Amzn-") {
			continue
		}
		out[k] = vv
	}
	return out
}

// escapeSegment escapes a model id as one path segment as anthropic-sdk-go
// does (requestconfig.EscapePathSegment): url.PathEscape, with RFC 3986's
// sub-delimiters left as they are. ':' stays, '/' (an ARN's) is %2F.
func escapeSegment(s string) string {
	e := url.PathEscape(s)
	if !strings.ContainsAny(s, "!'()*,;") {
		return e
	}
	return subDelims.Replace(e)
}

var subDelims = strings.NewReplacer("%21", "!", "%27", "'", "%28", "(", "%29", ")", "%2A", "*", "%2C", ",", "%3B", ";")
