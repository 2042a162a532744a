package mockllm_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/corralhq/corral/internal/mockllm"
)

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func get(tb testing.TB, url string, c *http.Client) (int, []byte) {
	tb.Helper()
	resp, err := c.Get(url)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(tb, resp)
}

func TestModels(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want []string
	}{
		{"default", nil, mockllm.DefaultModels},
		{"custom", []string{"a", "b"}, []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := startServer(t, mockllm.Options{Models: tt.give})
			status, body := get(t, ts.URL+"/v1/models", ts.Client())
			if status != 200 {
				t.Fatalf("status = %d, want 200", status)
			}
			l := decode[struct {
				Object string  `json:"object"`
				Data   []model `json:"data"`
			}](t, body)
			var ids []string
			for _, m := range l.Data {
				if m.Object != "model" || m.Created == 0 || m.OwnedBy == "" {
					t.Errorf("model %+v lacks object, created or owned_by", m)
				}
				ids = append(ids, m.ID)
			}
			if l.Object != "list" || !slices.Equal(ids, tt.want) {
				t.Errorf("object, ids = %q, %v; want list, %v", l.Object, ids, tt.want)
			}

			status, body = get(t, ts.URL+"/v1/models/"+tt.want[0], ts.Client())
			if m := decode[model](t, body); status != 200 || m.ID != tt.want[0] {
				t.Errorf("GET /v1/models/%s = %d %+v", tt.want[0], status, m)
			}
		})
	}
}

func TestDefaultModelsListed(t *testing.T) {
	for _, want := range []string{"gpt-4o-mini", "gpt-4o", "gpt-3.5-turbo-instruct", "text-embedding-3-small", "mock-404", "mock-hang"} {
		if !slices.Contains(mockllm.DefaultModels, want) {
			t.Errorf("DefaultModels lacks %q", want)
		}
	}
}

// TestAnthropicModelsWithSDK checks that the mock answers Anthropic's
// Models API as anthropic-sdk-go reads it: Models.Get of its Claude models
// (current and older ids, and a -tool variant) in Anthropic's shape, one
// page of Models.List with has_more and the cursors, every model through
// ListAutoPaging, and an unknown model as Anthropic's 404.
func TestAnthropicModelsWithSDK(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{})
	c := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
	ctx := testContext(t)

	for _, tt := range []struct{ id, display string }{
		{"claude-sonnet-5-5", "Claude Sonnet 5.5"},
		{"claude-sonnet-4-5", "Claude Sonnet 4.5"},
		{"claude-haiku-4-5", "Claude Haiku 4.5"},
		{"claude-sonnet-5-5-tool", "Claude Sonnet 5.5"},
	} {
		m, err := c.Models.Get(ctx, tt.id, anthropic.ModelGetParams{})
		if err != nil {
			t.Errorf("Models.Get(%s): %v", tt.id, err)
			continue
		}
		if m.ID != tt.id || m.Type != "model" || m.DisplayName != tt.display || m.CreatedAt.IsZero() {
			t.Errorf("Models.Get(%s) = %s", tt.id, m.RawJSON())
		}
	}

	page, err := c.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(3)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 3 || !page.HasMore || page.FirstID != page.Data[0].ID || page.LastID != page.Data[2].ID {
		t.Errorf("Models.List(limit 3) = %s", page.RawJSON())
	}
	var ids []string
	it := c.Models.ListAutoPaging(ctx, anthropic.ModelListParams{})
	for it.Next() {
		ids = append(ids, it.Current().ID)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, mockllm.DefaultModels) {
		t.Errorf("ListAutoPaging = %v; want %v", ids, mockllm.DefaultModels)
	}
	for _, want := range []string{"claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5", "claude-sonnet-4-5"} {
		if !slices.Contains(ids, want) {
			t.Errorf("the list lacks %s", want)
		}
	}

	_, err = c.Models.Get(ctx, "claude-nonexistent", anthropic.ModelGetParams{})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || !strings.Contains(aerr.RawJSON(), `"type":"not_found_error"`) {
		t.Errorf("Models.Get(unknown) = %v; want Anthropic's 404 not_found_error", err)
	}
}

// TestAnthropicModelsPaging checks the list's cursors and its refusal of
// a limit out of 1..1000 in Anthropic's error shape.
func TestAnthropicModelsPaging(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{Models: []string{"a", "b", "c", "d"}})
	for _, tt := range []struct {
		query  string
		status int
		want   string
	}{
		{"", 200, `{"data":[{"type":"model","id":"a","display_name":"a","created_at":"2025-01-01T00:00:00Z"},{"type":"model","id":"b","display_name":"b","created_at":"2025-01-01T00:00:00Z"},{"type":"model","id":"c","display_name":"c","created_at":"2025-01-01T00:00:00Z"},{"type":"model","id":"d","display_name":"d","created_at":"2025-01-01T00:00:00Z"}],"has_more":false,"first_id":"a","last_id":"d"}`},
		{"?limit=2&after_id=a", 200, `{"data":[{"type":"model","id":"b","display_name":"b","created_at":"2025-01-01T00:00:00Z"},{"type":"model","id":"c","display_name":"c","created_at":"2025-01-01T00:00:00Z"}],"has_more":true,"first_id":"b","last_id":"c"}`},
		{"?limit=2&before_id=d", 200, `{"data":[{"type":"model","id":"b","display_name":"b","created_at":"2025-01-01T00:00:00Z"},{"type":"model","id":"c","display_name":"c","created_at":"2025-01-01T00:00:00Z"}],"has_more":true,"first_id":"b","last_id":"c"}`},
		{"?after_id=d", 200, `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
		{"?limit=0", 400, `{"error":{"message":"limit: must be between 1 and 1000","type":"invalid_request_error"},"type":"error"}`},
		{"?limit=x", 400, `{"error":{"message":"limit: must be between 1 and 1000","type":"invalid_request_error"},"type":"error"}`},
	} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/v1/models"+tt.query, nil)
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		resp.Body.Close()
		if resp.StatusCode != tt.status || string(body) != tt.want {
			t.Errorf("GET /v1/models%s = %d %s; want %d %s", tt.query, resp.StatusCode, body, tt.status, tt.want)
		}
	}
}
