package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/spend"
)

// TestUsageModelNamesTheAnswer: a usage row is the model a 200 answer
// names (the requested one when it names none); no answer, an error, or
// a name that could spoof or break a row is other.
func TestUsageModelNamesTheAnswer(t *testing.T) {
	ok := func(model string) *entry.Entry { return &entry.Entry{Status: http.StatusOK, Model: model} }
	for _, tt := range []struct {
		name      string
		e         *entry.Entry
		requested string
		want      string
	}{
		{"the answer's name", ok("gpt-4o-mini-2024-07-18"), "gpt-4o-mini", "gpt-4o-mini-2024-07-18"},
		{"an answer naming none", ok(""), "gpt-4o-mini", "gpt-4o-mini"},
		{"no answer", nil, "gpt-4o-mini", spend.OtherModel},
		{"an upstream's error", &entry.Entry{Status: http.StatusBadGateway, Model: "gpt-4o"}, "gpt-4o", spend.OtherModel},
		{"no model at all", ok(""), "", spend.OtherModel},
		{"a bidi override", ok("gpt\u202e-4o"), "gpt-4o", spend.OtherModel},
		{"a NUL", ok("gpt\x00-4o"), "gpt-4o", spend.OtherModel},
		{"a control character", ok("gpt-4o\n"), "gpt-4o", spend.OtherModel},
		{"not UTF-8", ok("gpt-\xff"), "gpt-4o", spend.OtherModel},
		{"too long", ok(strings.Repeat("m", maxUsageModel+1)), "gpt-4o", spend.OtherModel},
		{"long enough", ok(strings.Repeat("m", maxUsageModel)), "gpt-4o", strings.Repeat("m", maxUsageModel)},
	} {
		if got := usageModel(tt.e, tt.requested); got != tt.want {
			t.Errorf("%s: usageModel = %q; want %q", tt.name, got, tt.want)
		}
	}
}
