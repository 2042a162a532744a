package openai

// IsDone reports whether data is the OpenAI end-of-stream marker.
func IsDone(data []byte) bool { return string(data) == "[DONE]" }

// ErrorEvent frames an OpenAI-shaped error body as an SSE event, for a
// stream that breaks after its headers were sent.
func ErrorEvent(body []byte) []byte {
	ev := make([]byte, 0, len(body)+8)
	ev = append(ev, "data: "...)
	ev = append(ev, body...)
	return append(ev, "\n\n"...)
}
