package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
)

// A batch's input file holds requests the upstream runs itself, in the
// shared account, where no check of Corral's can see them. So before a
// batch is created Corral reads its input file back from the upstream and
// checks every line as it checks a direct request: a line naming an
// object this tenant does not own (a previous_response_id, an input
// file) refuses the whole batch with the same 404.
const (
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
)

// checkBatchInput checks the requests in a batch's input file before the
// batch is created. body is the create request's body.
func (s *Server) checkBatchInput(ctx context.Context, t *tenant.Tenant, rt route, body []byte) *apiError {
	var b struct {
		InputFileID string `json:"input_file_id"`
	}
	if json.Unmarshal(body, &b) != nil || b.InputFileID == "" {
		return nil // the upstream refuses a batch without an input file
	}
	resp, err := s.send(ctx, rt.pin, "", upstream.Request{Method: http.MethodGet, Path: "/files/" + url.PathEscape(b.InputFileID) + "/content", Header: http.Header{}})
	if err != nil {
		recordFrom(ctx).err = err.Error()
		return errBatchInputUnread
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		recordFrom(ctx).err = "batch input file: upstream answered " + resp.Status
		return errBatchInputUnread
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
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxBatchLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		found, err := objects.Refs("application/json", line)
		if err != nil || line[0] != '{' {
			return errBatchInputUnchecked
		}
		var l struct {
			URL string `json:"url"`
		}
		_ = json.Unmarshal(line, &l)
		if acc := objects.Route(http.MethodPost, strings.TrimPrefix(l.URL, "/v1")); acc.Op == objects.Object {
			found.IDs = append(found.IDs, acc.ID)
		}
		for _, id := range found.IDs {
			if seen[id] {
				continue
			}
			if len(seen) >= maxBatchRefs {
				return errBatchInputUnchecked
			}
			seen[id] = true
			pending = append(pending, id)
			if len(pending) == batchLookup {
				if aerr := flush(); aerr != nil {
					return aerr
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return errBatchInputUnchecked
		}
		recordFrom(ctx).err = "batch input file: " + err.Error()
		return errBatchInputUnread
	}
	return flush()
}
