package server

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/corralhq/corral/internal/failover"
)

// spliceMemory remembers which upstreams refuse the body a streaming
// flight prepares (the usage chunk asked for, wire.Format's Prepare), as
// some OpenAI-compatible servers refuse stream_options. It is learnt only
// from an upstream's own refusal of the parameter, so neither another
// upstream's refusal nor anything a client writes turns the splice off for
// an upstream. Its zero value knows of no refusal.
type spliceMemory struct {
	mu      sync.Mutex      // protects refuses
	refuses map[string]bool // upstream name → refused a prepared body that its client's own body did not
}

// skip reports whether a flight's prepared body should not be sent: when
// the upstream pinned refuses it, or, unpinned, when every upstream that
// could be routed the request (serving) refuses it, as a lone upstream
// that refuses it does. Where some do and some do not, the prepared body
// goes, and a refusing upstream that routing picks is sent the client's
// own body after its refusal (caller.unspliced).
func (m *spliceMemory) skip(pinned string, serving []string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pinned != "" {
		return m.refuses[pinned]
	}
	for _, name := range serving {
		if !m.refuses[name] {
			return false
		}
	}
	return len(serving) > 0
}

// refused records that upstream refuses prepared bodies; first reports
// whether this is news.
func (m *spliceMemory) refused(upstream string) (first bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refuses[upstream] {
		return false
	}
	if m.refuses == nil {
		m.refuses = map[string]bool{}
	}
	m.refuses[upstream] = true
	return true
}

// routable is the part of failover.Router that says which upstreams there
// are (a Server's Upstreams is one in every configuration cmd/gateway
// builds).
type routable interface{ Current() *failover.Set }

var _ routable = (*failover.Router)(nil)

// serving names the upstreams that serve model on api, or none when the
// server's Upstreams cannot say.
func (s *Server) serving(api, model string) []string {
	r, ok := s.up.(routable)
	if !ok {
		return nil
	}
	var names []string
	for _, m := range r.Current().Pool.Members() {
		if m.Serves(api, model) {
			names = append(names, m.Name)
		}
	}
	return names
}

// refusesStreamOptions reports whether a 400 body is the upstream's refusal
// of stream_options itself: its error's param (OpenAI's
// {"error":{"param":...}}, or the flat {"object":"error","param":...} of
// some compatible servers) names stream_options or a field of it. The
// message is never read: a client can put any text in it (an upstream
// echoes what it did not understand).
func refusesStreamOptions(body []byte) bool {
	var e struct {
		Param *string `json:"param"`
		Error *struct {
			Param *string `json:"param"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return false
	}
	param := e.Param
	if e.Error != nil {
		param = e.Error.Param
	}
	return param != nil && (*param == "stream_options" || strings.HasPrefix(*param, "stream_options."))
}
