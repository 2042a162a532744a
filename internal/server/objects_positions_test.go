package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/objects/objectstest"
)

// TestObjectsReadWhereTheSchemaPutsThem: Codex sends its session as
// client_metadata.thread_id on every Responses call, and agents with their
// own tools carry file_id and thread_id in their tool_use inputs. Those
// name the caller's own things, never the upstream's objects, and are
// forwarded; another tenant's file in a content block's source.file_id is
// still 404, never forwarded.
func TestObjectsReadWhereTheSchemaPutsThem(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, withAnthropic, objectTenants, withObjectUpstream(fake, log))
	ctx := context.Background()
	acmes := newFile(t, h.gw.URL, acmeKey, "a.jsonl")

	// Another tenant's file where Messages reads files: refused unforwarded.
	theirs := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":[` +
		`{"type":"document","source":{"type":"file","file_id":"` + acmes + `"}},{"type":"text","text":"summarise"}]}]}`
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		before := log.count()
		a := postMessages(ctx, h.gw.URL+path, betaKey, theirs)
		if a.status != http.StatusNotFound || !strings.Contains(a.body, `"not_found_error"`) {
			t.Errorf("%s naming acme's file in source.file_id = %d %s; want 404 not_found_error", path, a.status, a.body)
		}
		if n := log.count(); n != before {
			t.Errorf("%s: forwarded: %v", path, log.since(before))
		}
	}

	// Codex's Responses body.
	codex := `{"model":"gpt-4o-mini","instructions":"You are Codex.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],` +
		`"tools":[{"type":"function","name":"shell","parameters":{"type":"object","properties":{"thread_id":{"type":"string"}}}}],"store":false,` +
		`"prompt_cache_key":"0199a213-81c0-7800-8aa1-bbab2a035a53","client_metadata":{"thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}}`
	before := log.count()
	if code, body := objectstest.Call(t, "POST", h.gw.URL+"/v1/responses", betaKey, codex); code != http.StatusOK {
		t.Errorf("Codex's Responses body with client_metadata.thread_id = %d %s; want 200", code, body)
	}
	if log.count() == before {
		t.Error("Codex's Responses body was not forwarded")
	}

	// An agent's second turn: its own Drive and Slack tools' inputs.
	agent := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"find the doc"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"drive_get","input":{"file_id":"1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms"}},` +
		`{"type":"tool_use","id":"toolu_2","name":"slack_reply","input":{"thread_id":"1700000000.123456","also":"` + acmes + `"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"{\"file_id\":\"1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms\"}"},` +
		`{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"thread_id 1700000000.123456"}]}]}],` +
		`"tools":[{"name":"drive_get","input_schema":{"type":"object","properties":{"file_id":{"type":"string"}}}}],"metadata":{"user_id":"u"}}`
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		before := log.count()
		if a := postMessages(ctx, h.gw.URL+path, betaKey, agent); a.status != http.StatusOK {
			t.Errorf("%s with tool_use inputs naming file_id and thread_id = %d %s; want 200", path, a.status, a.body)
		}
		if log.count() == before {
			t.Errorf("%s: the agent's turn was not forwarded", path)
		}
	}
}
