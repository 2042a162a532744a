package mockllm_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/corralhq/corral/internal/mockllm"
)

func Example() {
	ts := httptest.NewServer(mockllm.New(mockllm.Options{}))
	defer ts.Close()

	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var c struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&c)
	fmt.Println(resp.StatusCode, c.Choices[0].Message.Content)

	resp, err = http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"mock-404","messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// 200 mock reply to: hello
	// 404
}
