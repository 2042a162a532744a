package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeMessageBatches serves Anthropic's Message Batches API on one shared
// account: every batch any tenant made is in its list, pages with after_id.
func fakeMessageBatches(next http.Handler) http.Handler {
	var mu sync.Mutex
	var ids []string
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/messages/batches") {
			next.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		batch := func(id string) map[string]any {
			return map[string]any{"id": id, "type": "message_batch", "processing_status": "ended"}
		}
		switch rest := strings.TrimPrefix(r.URL.Path, "/v1/messages/batches"); {
		case rest == "" && r.Method == http.MethodPost:
			id := fmt.Sprintf("msgbatch_%02d", len(ids))
			ids = append(ids, id)
			_ = json.NewEncoder(w).Encode(batch(id))
		case rest == "":
			after := r.URL.Query().Get("after_id")
			var data []any
			started := after == ""
			for _, id := range ids {
				if started && len(data) < 2 {
					data = append(data, batch(id))
				}
				if id == after {
					started = true
				}
			}
			more := len(data) == 2 && data[1].(map[string]any)["id"] != ids[len(ids)-1]
			_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "has_more": more, "first_id": nil, "last_id": nil})
		default:
			id, tail, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
			if tail == "results" {
				w.Header().Set("Content-Type", "application/x-jsonl")
				fmt.Fprintf(w, `{"custom_id":"secret answer of %s"}`+"\n", id)
				return
			}
			_ = json.NewEncoder(w).Encode(batch(id))
		}
	})
}

// TestMessageBatchesStayTheirOwners: Anthropic's Message Batches on the
// shared account are stored objects like OpenAI's batches: a tenant lists,
// reads and fetches the results of its own only.
func TestMessageBatchesStayTheirOwners(t *testing.T) {
	h := newHarness(t, withAnthropic, func(o *harnessOptions) { o.wrapUpstream = fakeMessageBatches })
	ctx := context.Background()
	base := h.gw.URL + "/v1/messages/batches"
	// A model both tenants may use: the limited tenant's allow-list
	// covers every request's params.model.
	create := `{"requests":[{"custom_id":"a","params":{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"x"}]}}]}`
	var mine []string
	for i := range 3 {
		key := acmeKey
		if i == 1 {
			key = limitedKey
		}
		a := postMessages(ctx, base, key, create)
		var b struct{ ID string }
		if a.status != 200 || json.Unmarshal([]byte(a.body), &b) != nil {
			t.Fatalf("create: %d %s", a.status, a.body)
		}
		if key == limitedKey {
			mine = append(mine, b.ID)
		}
	}
	other := "msgbatch_00" // acme's
	list, _ := getWith(ctx, base, "X-Api-Key", limitedKey)
	if list.status != 200 || strings.Contains(list.body, other) || strings.Contains(list.body, "msgbatch_02") || !strings.Contains(list.body, mine[0]) {
		t.Errorf("list: %d %s; want only %v", list.status, list.body, mine)
	}
	for _, p := range []string{"/" + other, "/" + other + "/results"} {
		a, _ := getWith(ctx, base+p, "X-Api-Key", limitedKey)
		if a.status != 404 || strings.Contains(a.body, "secret") || !strings.HasPrefix(a.body, `{"type":"error","error":{"type":"not_found_error"`) {
			t.Errorf("GET %s of another tenant's batch: %d %s", p, a.status, a.body)
		}
	}
	if a, _ := getWith(ctx, base+"/"+mine[0]+"/results", "X-Api-Key", limitedKey); a.status != 200 || !strings.Contains(a.body, mine[0]) {
		t.Errorf("own results: %d %s", a.status, a.body)
	}
	// A message batch is Anthropic's: OpenAI's batches API does not reach
	// it, even for its owner.
	if a, _ := getWith(ctx, h.gw.URL+"/v1/batches/"+mine[0], "Authorization", "Bearer "+limitedKey); a.status != 404 ||
		a.body != `{"error":{"message":"No such object: `+mine[0]+`","type":"invalid_request_error","param":null,"code":"not_found"}}` {
		t.Errorf("GET /v1/batches/<own message batch> = %d %s; want Corral's 404", a.status, a.body)
	}
}

// TestMessageBatchesListPagesWithAfterID: a filtered list follows
// Anthropic's pages with after_id, so batches past the first page are
// found.
func TestMessageBatchesListPagesWithAfterID(t *testing.T) {
	h := newHarness(t, withAnthropic, func(o *harnessOptions) { o.wrapUpstream = fakeMessageBatches })
	ctx := context.Background()
	base := h.gw.URL + "/v1/messages/batches"
	// A model both tenants may use: the limited tenant's allow-list
	// covers every request's params.model.
	create := `{"requests":[{"custom_id":"a","params":{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"x"}]}}]}`
	for i := range 5 {
		key := acmeKey
		if i >= 3 {
			key = limitedKey
		}
		if a := postMessages(ctx, base, key, create); a.status != 200 {
			t.Fatalf("create: %d %s", a.status, a.body)
		}
	}
	list, _ := getWith(ctx, base+"?limit=2", "X-Api-Key", limitedKey)
	if list.status != 200 || !strings.Contains(list.body, "msgbatch_03") || !strings.Contains(list.body, "msgbatch_04") || strings.Contains(list.body, "msgbatch_00") {
		t.Errorf("list: %d %s; want msgbatch_03 and msgbatch_04 only", list.status, list.body)
	}
}

// getWith sends a GET to url with the header pairs hdr and reads the whole
// answer.
func getWith(ctx context.Context, url string, hdr ...string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return answer{err: err}, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// TestMessageBatchesCursorsAreTheCallers: after_id and before_id page a
// list from an object; another tenant's batch as a cursor would tell
// that it exists and where it sits, so it is 404 like the batch itself.
func TestMessageBatchesCursorsAreTheCallers(t *testing.T) {
	var forwarded atomic.Int32
	h := newHarness(t, withAnthropic, func(o *harnessOptions) {
		o.wrapUpstream = func(next http.Handler) http.Handler {
			batches := fakeMessageBatches(next)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				forwarded.Add(1)
				batches.ServeHTTP(w, r)
			})
		}
	})
	ctx := context.Background()
	base := h.gw.URL + "/v1/messages/batches"
	create := `{"requests":[{"custom_id":"a","params":{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"x"}]}}]}`
	var ids []string
	for _, key := range []string{acmeKey, limitedKey} {
		a := postMessages(ctx, base, key, create)
		var b struct{ ID string }
		if a.status != 200 || json.Unmarshal([]byte(a.body), &b) != nil {
			t.Fatalf("create: %d %s", a.status, a.body)
		}
		ids = append(ids, b.ID)
	}
	for _, q := range []string{"after_id", "before_id"} {
		before := forwarded.Load()
		a, _ := getWith(ctx, base+"?"+q+"="+ids[0], "X-Api-Key", limitedKey)
		if a.status != http.StatusNotFound || !strings.Contains(a.body, `"not_found_error"`) {
			t.Errorf("%s=acme's batch as limited = %d %s; want 404 not_found_error", q, a.status, a.body)
		}
		if forwarded.Load() != before {
			t.Errorf("%s=acme's batch: forwarded", q)
		}
		if a, _ := getWith(ctx, base+"?"+q+"="+ids[1], "X-Api-Key", limitedKey); a.status != http.StatusOK {
			t.Errorf("%s=its own batch = %d %s; want 200", q, a.status, a.body)
		}
	}
}
