package mockllm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corralhq/corral/internal/mockllm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startServer runs a mock as an httptest server, closed when the test ends.
func startServer(tb testing.TB, opts mockllm.Options) (*mockllm.Server, *httptest.Server) {
	tb.Helper()
	s := mockllm.New(opts)
	ts := httptest.NewServer(s)
	tb.Cleanup(ts.Close)
	return s, ts
}

// post sends body to path and returns the status, headers and full body.
func post(tb testing.TB, ts *httptest.Server, path, body string) (int, http.Header, []byte) {
	tb.Helper()
	resp, err := ts.Client().Post(ts.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("POST %s: read body: %v", path, err)
	}
	return resp.StatusCode, resp.Header, b
}

// tryPost is post for goroutines other than the test's: it reports errors
// instead of failing the test.
func tryPost(ts *httptest.Server, path, body string) (int, error) {
	resp, err := ts.Client().Post(ts.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// readEvents reads the data payloads of an SSE body, and the read error
// that ended it (nil on a clean EOF).
func readEvents(r io.Reader) ([]string, error) {
	var events []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			events = append(events, data)
		}
	}
	return events, sc.Err()
}

// postStream sends body and returns the SSE events and the read error.
func postStream(tb testing.TB, ts *httptest.Server, path, body string) (*http.Response, []string, error) {
	tb.Helper()
	resp, err := ts.Client().Post(ts.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		tb.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	events, err := readEvents(resp.Body)
	return resp, events, err
}

// head is what every answer and chunk starts with.
type head struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
}

type chunk struct {
	head
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type chatCompletion struct {
	head
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

type apiError struct {
	Error struct {
		Message *string `json:"message"`
		Type    *string `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decode[T any](tb testing.TB, b []byte) T {
	tb.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("decode %T: %v\nbody: %s", v, err, b)
	}
	return v
}

// testContext is a context that ends with the test or after 10s, so a bug
// fails a Wait instead of hanging the run.
func testContext(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func readAll(tb testing.TB, resp *http.Response) []byte {
	tb.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read body: %v", err)
	}
	return b
}
