package server

import "testing"

func TestRefusesStreamOptions(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{`{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error","param":"stream_options","code":null}}`, true},
		{`{"error":{"message":"bad","param":"stream_options.include_usage"}}`, true},
		{`{"object":"error","message":"bad","type":"BadRequestError","param":"stream_options","code":400}`, true},
		{`{"error":{"message":"Invalid 'messages[0].content': \"stream_options\" is not allowed.","param":"messages"}}`, false},
		{`{"error":{"message":"stream_options is not supported","param":null}}`, false},
		{`{"error":{"message":"x","param":"stream_optionsx"}}`, false},
		{`stream_options`, false},
		{`{"error":"stream_options"}`, false},
	}
	for _, tt := range tests {
		if got := refusesStreamOptions([]byte(tt.give)); got != tt.want {
			t.Errorf("refusesStreamOptions(%s) = %v; want %v", tt.give, got, tt.want)
		}
	}
}

func TestSpliceMemory(t *testing.T) {
	var m spliceMemory
	if m.skip("", []string{"a"}) || m.skip("a", nil) {
		t.Fatal("an empty memory skips the splice")
	}
	if !m.refused("a") || m.refused("a") {
		t.Error("refused does not report news once")
	}
	tests := []struct {
		pinned  string
		serving []string
		want    bool
	}{
		{"a", nil, true},
		{"b", nil, false},
		{"", []string{"a"}, true},
		{"", []string{"a", "b"}, false},
		{"", nil, false},
	}
	for _, tt := range tests {
		if got := m.skip(tt.pinned, tt.serving); got != tt.want {
			t.Errorf("skip(%q, %v) = %v; want %v", tt.pinned, tt.serving, got, tt.want)
		}
	}
}
