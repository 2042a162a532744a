package negcache

import (
	"fmt"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		give int
		want Class
	}{
		{200, Answer},
		{400, Deterministic},
		{404, Deterministic},
		{422, Deterministic},
		{401, UpstreamAuth},
		{403, UpstreamAuth},
		{408, Transient},
		{409, Transient},
		{429, Transient},
		{500, Transient},
		{502, Transient},
		{503, Transient},
		{504, Transient},
		{201, Transient},
		{301, Transient},
		{413, Transient},
	}
	for _, tt := range tests {
		if got := Classify(tt.give); got != tt.want {
			t.Errorf("Classify(%d) = %v; want %v", tt.give, got, tt.want)
		}
	}
}

func TestClassifyResponse404(t *testing.T) {
	tests := []struct {
		give string
		want Class
	}{
		{`{"error":{"message":"The model x does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`, Deterministic},
		{`{"error":{"message":"Invalid URL (POST /chat/completions)","type":"invalid_request_error","param":null,"code":null}}`, Transient},
		{`{"error":{"message":"not found","code":"unknown_url"}}`, Transient},
		{`{"error":{"code":404}}`, Transient},
		{`<html>404 Not Found</html>`, Transient},
		{``, Transient},
	}
	for _, tt := range tests {
		if got := ClassifyResponse(404, []byte(tt.give)); got != tt.want {
			t.Errorf("ClassifyResponse(404, %s) = %v; want %v", tt.give, got, tt.want)
		}
	}
	// Other statuses do not look at the body.
	for _, status := range []int{200, 400, 401, 422, 429, 500} {
		if got, want := ClassifyResponse(status, nil), Classify(status); got != want {
			t.Errorf("ClassifyResponse(%d, nil) = %v; want %v as Classify", status, got, want)
		}
	}
}

func ExampleClassify() {
	for _, status := range []int{200, 404, 401, 503} {
		fmt.Println(status, Classify(status))
	}
	// Output:
	// 200 answer
	// 404 deterministic
	// 401 upstream_auth
	// 503 transient
}
