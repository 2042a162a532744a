package mockllm_test

import (
	"net/http"
	"slices"
	"testing"

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
