package mockllm_test

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

type embeddingList struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func TestEmbeddings(t *testing.T) {
	tests := []struct {
		name       string
		give       string
		wantInputs []string
		wantDims   int
		wantTokens int
	}{
		{"string", `{"model":"text-embedding-3-small","input":"hello world"}`, []string{"hello world"}, 8, 2},
		{"array", `{"model":"text-embedding-3-small","input":["a","b c","a"]}`, []string{"a", "b c", "a"}, 8, 4},
		{"dimensions", `{"model":"text-embedding-3-small","input":"x","dimensions":256}`, []string{"x"}, 256, 1},
		{"tokens", `{"model":"text-embedding-3-small","input":[[1,2],[3]]}`, []string{"[1,2]", "[3]"}, 8, 2},
	}
	_, ts := startServer(t, mockllm.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := post(t, ts, "/v1/embeddings", tt.give)
			if status != 200 {
				t.Fatalf("status = %d, want 200; body %s", status, body)
			}
			l := decode[embeddingList](t, body)
			if l.Object != "list" || l.Model != "text-embedding-3-small" || len(l.Data) != len(tt.wantInputs) {
				t.Fatalf("object, model, len = %q, %q, %d; want list, text-embedding-3-small, %d", l.Object, l.Model, len(l.Data), len(tt.wantInputs))
			}
			for i, d := range l.Data {
				want := make([]float32, tt.wantDims)
				mockllm.Embed(want, tt.wantInputs[i])
				if d.Object != "embedding" || d.Index != i || !equalFloats(d.Embedding, want) {
					t.Errorf("data[%d] = %s %d %v, want embedding %d %v", i, d.Object, d.Index, d.Embedding, i, want)
				}
				if n := norm(d.Embedding); math.Abs(n-1) > 1e-5 {
					t.Errorf("data[%d] norm = %v, want 1", i, n)
				}
			}
			if l.Usage.PromptTokens != tt.wantTokens || l.Usage.TotalTokens != tt.wantTokens {
				t.Errorf("usage = %+v, want %d tokens", l.Usage, tt.wantTokens)
			}
		})
	}
}

func TestEmbeddingsDistinctAndBase64(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{})
	_, _, body := post(t, ts, "/v1/embeddings", `{"model":"e","input":["a","b"],"dimensions":32}`)
	l := decode[embeddingList](t, body)
	if equalFloats(l.Data[0].Embedding, l.Data[1].Embedding) {
		t.Errorf("inputs a and b got the same vector")
	}

	_, _, body = post(t, ts, "/v1/embeddings", `{"model":"e","input":["a","b"],"dimensions":32,"encoding_format":"base64"}`)
	b64 := decode[struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}](t, body)
	for i, d := range b64.Data {
		raw, err := base64.StdEncoding.DecodeString(d.Embedding)
		if err != nil {
			t.Fatalf("data[%d]: %v", i, err)
		}
		got := make([]float32, len(raw)/4)
		for j := range got {
			got[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		if !equalFloats(got, l.Data[i].Embedding) {
			t.Errorf("base64 data[%d] = %v, want %v", i, got, l.Data[i].Embedding)
		}
	}
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func norm(v []float32) float64 {
	var s float64
	for _, f := range v {
		s += float64(f) * float64(f)
	}
	return math.Sqrt(s)
}
