package upstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/redact"
)

// CheckTimeout bounds the start-up check: long enough for a real provider
// across an ocean, short enough that a typo costs seconds, not minutes.
const CheckTimeout = 5 * time.Second

// Check asks the upstream for its model list (GET <base>/models, Corral's
// key attached) and reports whether it answered like an OpenAI-compatible
// API. It exists for start-up: a base URL without its version path
// (https://api.openai.com instead of …/v1) or a wrong key otherwise shows up
// only as every request failing. The error names the URL (credentials
// redacted) and what came back; it never carries the key. The call is
// bounded by CheckTimeout and ctx.
func (c *Client) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	resp, err := c.send(ctx, Request{Method: http.MethodGet, Path: "/models"})
	u := *c.base
	u.Path += "/models"
	where := redact.URL(u.String())
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("upstream check: GET %s: no answer within %s", where, CheckTimeout)
		}
		return fmt.Errorf("upstream check: GET %s: %w", where, classify(ctx, err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("upstream check: GET %s answered %d: the upstream refused Corral's key (CORRAL_UPSTREAM_API_KEY)", where, resp.StatusCode)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("upstream check: GET %s answered 404: is the base URL right? It includes the version path, e.g. https://api.openai.com/v1", where)
	}
	return fmt.Errorf("upstream check: GET %s answered %d", where, resp.StatusCode)
}
