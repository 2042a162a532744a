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
