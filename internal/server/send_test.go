package server

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
)

// answer is one gateway response, read whole.
type answer struct {
	status int
	header http.Header
	body   string
	err    error
}

// send is post without testing.T, safe from any goroutine.
func send(ctx context.Context, base, key, body string, hdr ...string) answer {
	return postJSON(ctx, base+"/v1/chat/completions", body, append([]string{"Authorization", "Bearer " + key}, hdr...), readAll)
}

// postJSON posts a JSON body to url with the header pairs hdr (set in
// order, so a later pair wins) and turns the response into an answer, its
// body read by read. Safe from any goroutine.
func postJSON(ctx context.Context, url, body string, hdr []string, read func(io.Reader) (string, error)) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := read(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b, err: err}
}

// readAll reads a body as it came.
func readAll(r io.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}

// sendTo posts body to url with key as a bearer token, safe from any
// goroutine.
func sendTo(ctx context.Context, url, key, body string) answer {
	return sendWith(ctx, url, body, "Authorization", "Bearer "+key)
}

// sendWith posts a JSON body to url with the header pairs hdr and reads
// the whole answer, line by line (streams included).
func sendWith(ctx context.Context, url, body string, hdr ...string) answer {
	return postJSON(ctx, url, body, hdr, readLines)
}

// readLines reads a body line by line, joined by "\n" without a trailing
// one, so a stream's events compare whatever line endings it used.
func readLines(r io.Reader) (string, error) {
	var b strings.Builder
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
