package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/url"

	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/wire/openai"
)

// A batch's input file holds requests the upstream runs itself, in the
// shared account, where no check of Corral's can see them. So before a
// batch is created Corral reads its input file back from the upstream and
// checks every line as it checks a direct request: a line naming an
// object this tenant does not own (a previous_response_id, an input
// file) refuses the whole batch with the same 404, and a line naming a
// model the tenant may not use with the same 403. The lines' token
// estimates are charged against tokens/min when the batch is created.
const (
	// maxBatchInput bounds the input file Corral reads back: a larger one
	// is refused with a 400 before it is read (the upstream takes up to
	// 200 MB, but reading and checking that much on every create would
	// let one tenant spend the gateway's CPU at will).
	maxBatchInput = 32 << 20
	// maxBatchLine bounds one input line Corral reads (the upstream's own
	// per-request limit is far below it).
	maxBatchLine = 16 << 20
	// maxBatchRefs bounds the distinct ids one input file may name.
	maxBatchRefs = 100_000
	// batchLookup is how many ids one ownership lookup asks for.
	batchLookup = 1000
)

var (
	errBatchInputUnread    = serverError(http.StatusBadGateway, "upstream_error", "The gateway could not read the batch's input file back from the upstream to check it; retry shortly.")
	errBatchInputUnchecked = clientError(http.StatusBadRequest, "invalid_request_error", "The batch's input file could not be checked: every line must be a JSON object of at most 16 MiB naming at most 100000 objects.").withParam("input_file_id")
	errBatchInputTooLarge  = clientError(http.StatusBadRequest, "invalid_request_error", "The batch's input file is larger than this gateway accepts for a batch (32 MiB); split it into several batches.").withParam("input_file_id")
)

// errInputTooLarge is what capReader returns past maxBatchInput.
var errInputTooLarge = errors.New("server: batch input: larger than the cap")

// capReader reads at most left bytes and fails past them.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errInputTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	if c.left -= int64(n); c.left < 0 {
		return 0, errInputTooLarge
	}
	return n, err
}

// admitBatch checks a batch create (an OpenAI batch's input file, an
// Anthropic Message Batch's requests) and charges its requests' token
// estimate against tokens/min, as if each were sent now: the upstream runs
// them on the shared account outside every other Corral limit. false
// means refused (and answered).
func (s *Server) admitBatch(w http.ResponseWriter, r *http.Request, t *tenant.Tenant, rt route, acc objects.Access, body []byte) bool {
	var estimate int
	if acc.Kind == "batch" {
		est, aerr := s.checkBatchInput(r.Context(), t, rt, body)
		if aerr != nil {
			writeError(w, aerr)
			return false
		}
		estimate = est
	} else {
		estimate = messageBatchEstimate(body)
	}
	if t.TokensPerMinute <= 0 || estimate == 0 {
		return true
	}
	res, aerr := s.takeTokens(r.Context(), t, ratelimit.Tokens, t.TokensPerMinute, estimate)
	ratelimit.SetHeaders(w.Header(), ratelimit.Tokens.Suffix(), res)
	if aerr != nil {
		writeError(w, aerr)
		return false
	}
	return true
}

// checkBatchInput checks the requests in a batch's input file before the
// batch is created and returns their token estimate (each line's body
// bytes / 4 plus its max tokens). body is the create request's body.
func (s *Server) checkBatchInput(ctx context.Context, t *tenant.Tenant, rt route, body []byte) (int, *apiError) {
	var b struct {
		InputFileID string `json:"input_file_id"`
	}
	if json.Unmarshal(body, &b) != nil || b.InputFileID == "" {
		return 0, nil // the upstream refuses a batch without an input file
	}
	resp, err := s.send(ctx, rt.pin, "", upstream.Request{Method: http.MethodGet, Path: "/files/" + url.PathEscape(b.InputFileID) + "/content", Header: http.Header{}})
	if err != nil {
		recordFrom(ctx).err = err.Error()
		return 0, errBatchInputUnread
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		recordFrom(ctx).err = "batch input file: upstream answered " + resp.Status
		return 0, errBatchInputUnread
	}
	if resp.ContentLength > maxBatchInput {
		return 0, errBatchInputTooLarge
	}
	seen := map[string]bool{}
	var pending []string
	flush := func() *apiError {
		if len(pending) == 0 {
			return nil
		}
		_, aerr := s.guardObjects(ctx, t, objects.Access{}, objects.Body{IDs: pending}, false)
		pending = pending[:0]
		return aerr
	}
	estimate := 0
	sc := bufio.NewScanner(&capReader{r: resp.Body, left: maxBatchInput})
	sc.Buffer(make([]byte, 0, 64<<10), maxBatchLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		found, err := objects.BatchLine(line)
		if err != nil {
			return 0, errBatchInputUnchecked
		}
		for _, m := range found.Models {
			if !t.Allows(m) {
				return 0, errModelNotAllowed(m)
			}
		}
		estimate = addSaturating(estimate, batchLineEstimate(line))
		for _, id := range found.IDs {
			if seen[id] {
				continue
			}
			if len(seen) >= maxBatchRefs {
				return 0, errBatchInputUnchecked
			}
			seen[id] = true
			pending = append(pending, id)
			if len(pending) == batchLookup {
				if aerr := flush(); aerr != nil {
					return 0, aerr
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		switch {
		case errors.Is(err, errInputTooLarge):
			return 0, errBatchInputTooLarge
		case errors.Is(err, bufio.ErrTooLong):
			return 0, errBatchInputUnchecked
		}
		recordFrom(ctx).err = "batch input file: " + err.Error()
		return 0, errBatchInputUnread
	}
	return estimate, flush()
}

// batchLineEstimate is one batch line's tokens/min estimate: its bytes / 4
// (the body's, with the line's few other bytes) plus the completions its
// body asks for, as a direct request is estimated.
func batchLineEstimate(line []byte) int {
	var l struct {
		Body struct {
			MaxTokens           *float64 `json:"max_tokens"`
			MaxCompletionTokens *float64 `json:"max_completion_tokens"`
			MaxOutputTokens     *float64 `json:"max_output_tokens"`
			N                   *float64 `json:"n"`
		} `json:"body"`
	}
	_ = json.Unmarshal(line, &l) // BatchLine has read it
	maxTokens := 0
	for _, v := range []*float64{l.Body.MaxTokens, l.Body.MaxCompletionTokens, l.Body.MaxOutputTokens} {
		if v != nil && *v > 0 && *v < math.MaxInt32 {
			maxTokens = max(maxTokens, int(*v))
		}
	}
	n := 1
	if v := l.Body.N; v != nil && *v > 1 && *v < 1<<16 {
		n = int(*v)
	}
	return openai.EstimateTokens(len(line), maxTokens, n)
}

// messageBatchEstimate is the tokens/min estimate of an Anthropic Message
// Batch: each request's params bytes / 4 plus its max_tokens.
func messageBatchEstimate(body []byte) int {
	var b struct {
		Requests []struct {
			Params json.RawMessage `json:"params"`
		} `json:"requests"`
	}
	_ = json.Unmarshal(body, &b) // objectRefs has read it
	total := 0
	for _, q := range b.Requests {
		var p struct {
			MaxTokens *float64 `json:"max_tokens"`
		}
		_ = json.Unmarshal(q.Params, &p)
		est := (len(q.Params) + 3) / 4
		if p.MaxTokens != nil && *p.MaxTokens > 0 && *p.MaxTokens < math.MaxInt32 {
			est += int(*p.MaxTokens)
		}
		total = addSaturating(total, est)
	}
	return total
}

func addSaturating(a, b int) int {
	if b > math.MaxInt-a {
		return math.MaxInt
	}
	return a + b
}
