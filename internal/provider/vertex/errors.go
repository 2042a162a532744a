package vertex

import (
	"net/http"

	"github.com/tidwall/gjson"

	"github.com/corralhq/corral/internal/provider"
)

// parseError reads Google's error body, {"error":{"code":403,"message":..,
// "status":"PERMISSION_DENIED"}} (as a one-element array on some of
// Vertex's endpoints), into what the client is told: the same status,
// Google's message, and its status name as OpenAI's code. A body in
// another shape is not Google's: Claude's own errors on Vertex are
// Anthropic's already ({"type":"error","error":{...}}), the
// OpenAI-compatible endpoint's may be OpenAI's, and both pass as they
// are.
func parseError(status int, _ http.Header, body []byte) (provider.CloudError, bool) {
	doc := gjson.ParseBytes(body)
	if doc.IsArray() && len(doc.Array()) == 1 {
		doc = doc.Array()[0]
	}
	e := doc.Get("error")
	code, name := e.Get("code"), e.Get("status")
	if !e.IsObject() || code.Type != gjson.Number || name.Type != gjson.String {
		return provider.CloudError{}, false
	}
	msg := e.Get("message").String()
	if msg == "" {
		msg = name.String()
	}
	return provider.CloudError{Status: status, Message: msg, Code: name.String()}, true
}
