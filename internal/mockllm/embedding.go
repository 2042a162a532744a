package mockllm

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
)

const defaultDimensions = 8

type embeddingList struct {
	Object string          `json:"object"`
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  embeddingUsage  `json:"usage"`
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// serveEmbedding answers POST /v1/embeddings. It never streams, so the
// client cannot go away half way through an answer the mock controls.
func (s *Server) serveEmbedding(w http.ResponseWriter, _ *http.Request, req *request, pl *plan) (gone bool) {
	inputs, err := inputTexts(req.Input)
	if err != nil {
		s.writeBadRequest(w, err.Error(), "input")
		return false
	}
	dims := req.Dimensions
	if dims == 0 {
		dims = defaultDimensions
	}
	if dims < 0 || dims > maxDimensions {
		s.writeBadRequest(w, fmt.Sprintf("dimensions must be between 1 and %d.", maxDimensions), "dimensions")
		return false
	}
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		s.writeBadRequest(w, "encoding_format must be 'float' or 'base64'.", "encoding_format")
		return false
	}

	list := embeddingList{Object: "list", Data: make([]embeddingData, len(inputs)), Model: req.Model}
	words := 0
	vec := make([]float32, dims)
	for i, in := range inputs {
		words += wordCount(in)
		Embed(vec, in)
		var e any
		if b64 {
			raw := make([]byte, 4*dims)
			for j, f := range vec {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(f))
			}
			e = base64.StdEncoding.EncodeToString(raw)
		} else {
			e = append([]float32(nil), vec...)
		}
		list.Data[i] = embeddingData{Object: "embedding", Index: i, Embedding: e}
	}
	words = max(words, 1)
	list.Usage = embeddingUsage{PromptTokens: words, TotalTokens: words}
	s.writeJSON(w, mustMarshal(list), pl.cutAfter >= 0)
	return false
}

// Embed fills dst with the mock's embedding of input: a unit vector whose
// components come from sha256(sha256(input) || block counter). Tests may
// call it to compute the expected vector.
func Embed(dst []float32, input string) {
	var seed [sha256.Size + 4]byte
	sum := sha256.Sum256([]byte(input))
	copy(seed[:], sum[:])
	var block [sha256.Size]byte
	var norm float64
	for i := range dst {
		if i%8 == 0 {
			binary.BigEndian.PutUint32(seed[sha256.Size:], uint32(i/8))
			block = sha256.Sum256(seed[:])
		}
		u := binary.BigEndian.Uint32(block[(i%8)*4:])
		f := float64(u)/math.MaxUint32*2 - 1
		dst[i] = float32(f)
		norm += f * f
	}
	if norm == 0 {
		return
	}
	inv := 1 / math.Sqrt(norm)
	for i := range dst {
		dst[i] = float32(float64(dst[i]) * inv)
	}
}

// inputTexts returns the inputs of an embeddings request: a string, an
// array of strings, or token arrays (used as their JSON text).
func inputTexts(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("", "'input' is a required property.")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		if len(ss) == 0 {
			return nil, badRequest("", "'input' must not be an empty array.")
		}
		return ss, nil
	}
	return tokenTexts(raw)
}
