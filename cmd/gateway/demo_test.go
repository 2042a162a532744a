package main

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
)

// demoContext ends with the test or after 20 s, so a fault fails the test
// instead of hanging it.
func demoContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// demoAnthropic is anthropic-sdk-go pointed at a running demo gateway
// with the demo key.
func demoAnthropic(addr string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL("http://"+addr), aoption.WithAPIKey(DemoKey), aoption.WithMaxRetries(0))
}

// TestDemoAnthropicModels: through the demo gateway, anthropic-sdk-go's
// Models.Get finds the Claude models the README names (the current one
// and an older one) in Anthropic's shape, Models.List pages through them,
// and an unknown model is Anthropic's 404.
func TestDemoAnthropicModels(t *testing.T) {
	addr, _ := startDemo(t)
	c := demoAnthropic(addr)
	ctx := demoContext(t)
	for _, id := range []string{"claude-sonnet-5-5", "claude-sonnet-4-5"} {
		m, err := c.Models.Get(ctx, id, anthropic.ModelGetParams{})
		if err != nil {
			t.Fatalf("Models.Get(%s): %v", id, err)
		}
		if m.ID != id || m.Type != "model" || !strings.HasPrefix(m.DisplayName, "Claude Sonnet ") || m.CreatedAt.IsZero() {
			t.Errorf("Models.Get(%s) = %s", id, m.RawJSON())
		}
	}
	page, err := c.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if page.HasMore || !slices.Contains(ids, "claude-sonnet-5-5") || !slices.Contains(ids, "claude-opus-5-5") || page.FirstID != ids[0] {
		t.Errorf("Models.List = %s", page.RawJSON())
	}
	_, err = c.Models.Get(ctx, "claude-nonexistent", anthropic.ModelGetParams{})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || !strings.Contains(aerr.RawJSON(), `"not_found_error"`) {
		t.Errorf("Models.Get(unknown) = %v; want Anthropic's 404", err)
	}
}
