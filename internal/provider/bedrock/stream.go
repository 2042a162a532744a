package bedrock

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"
	"github.com/tidwall/gjson"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/upstream"
)

// eventStreamType is the media type of InvokeModelWithResponseStream's
// answer: AWS's binary event stream (prelude, headers, payload, CRCs).
const eventStreamType = "application/vnd.amazon.eventstream"

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == eventStreamType
}

// firstFrame turns resp, Bedrock's 200 event stream, into the client's
// answer. It reads frames until the first that says something: a chunk
// makes resp an Anthropic SSE stream that starts with that event and
// decodes the rest as it is read; an exception (Bedrock's way of failing
// a stream it has already answered 200) makes it the exception's status
// with an error body in the client API's shape, so the router fails over
// on it as on any status. Bedrock's response headers (request id,
// Retry-After) are kept.
func firstFrame(ctx context.Context, resp *http.Response) (*http.Response, error) {
	b := newSSEBody(resp.Body)
	for b.out.Len() == 0 && b.err == nil && b.exc == nil {
		b.err = b.next()
	}
	switch {
	case b.exc != nil:
		resp.Body.Close()
		e := *b.exc
		resp.StatusCode = e.Status
		resp.Status = strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
		resp.Header.Set("Content-Type", "application/json")
		provider.Replace(resp, provider.ErrorBody(provider.Anthropic, e))
		return resp, nil
	case b.out.Len() == 0:
		// The stream ended or broke before its first event: nothing
		// reached the client, so it is a failed call (it fails over).
		resp.Body.Close()
		kind := upstream.Connect
		switch {
		case ctx.Err() != nil:
			kind = upstream.Canceled
		case errors.Is(b.err, context.DeadlineExceeded):
			kind = upstream.Timeout
		}
		if b.err == io.EOF {
			b.err = io.ErrUnexpectedEOF
		}
		return nil, &upstream.Error{Kind: kind, Err: fmt.Errorf("bedrock: stream before its first event: %w", b.err)}
	}
	resp.Body = b
	resp.Header.Set("Content-Type", "text/event-stream")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return resp, nil
}

// sseBody reads Bedrock's event stream from rc and yields Anthropic's
// SSE: each chunk event's base64 "bytes" is one Anthropic event, written
// as "event: <type>\ndata: <json>\n\n". One frame is decoded at a time,
// when the reader has taken the previous event, so nothing is buffered
// beyond one event. An exception after the first event ends the stream
// with Anthropic's error event.
type sseBody struct {
	rc      io.ReadCloser
	dec     *eventstream.Decoder
	payload []byte       // a frame's payload, reused
	raw     []byte       // a chunk's decoded event, reused
	out     bytes.Buffer // the SSE bytes of the current event not yet read
	err     error        // what Read returns once out is drained
	exc     *provider.CloudError
}

func newSSEBody(rc io.ReadCloser) *sseBody {
	return &sseBody{rc: rc, dec: eventstream.NewDecoder()}
}

func (b *sseBody) Read(p []byte) (int, error) {
	for b.out.Len() == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.err = b.next()
		if b.exc != nil {
			b.emit("error", provider.ErrorBody(provider.Anthropic, *b.exc))
			b.exc, b.err = nil, io.EOF
		}
	}
	return b.out.Read(p)
}

func (b *sseBody) Close() error { return b.rc.Close() }

// next decodes one frame: a chunk is written to out, an exception or
// error message is set in exc, other events are skipped. A stream that
// ends between frames ends with io.EOF.
func (b *sseBody) next() error {
	msg, err := b.dec.Decode(b.rc, b.payload[:0])
	if err != nil {
		if err == io.EOF {
			return io.EOF
		}
		return fmt.Errorf("bedrock: event stream: %w", err)
	}
	b.payload = msg.Payload
	switch headerString(msg.Headers, eventstreamapi.MessageTypeHeader) {
	case eventstreamapi.EventMessageType:
		if headerString(msg.Headers, eventstreamapi.EventTypeHeader) != "chunk" {
			return nil // Bedrock's other events carry nothing for the client
		}
		enc := gjson.GetBytes(msg.Payload, "bytes")
		if enc.Type != gjson.String {
			return errors.New("bedrock: event stream: a chunk without bytes")
		}
		// Base64 has no JSON escapes, so the raw token less its quotes is
		// the text; decoding into a reused buffer spares two copies.
		var src []byte
		if enc.Index > 0 && strings.IndexByte(enc.Raw, '\\') < 0 {
			src = msg.Payload[enc.Index+1 : enc.Index+len(enc.Raw)-1]
		} else {
			src = []byte(enc.Str) // escaped ("\/"): gjson's unescaped copy
		}
		if n := base64.StdEncoding.DecodedLen(len(src)); cap(b.raw) < n {
			b.raw = make([]byte, n)
		}
		n, err := base64.StdEncoding.Decode(b.raw[:cap(b.raw)], src)
		if err != nil {
			return fmt.Errorf("bedrock: event stream: chunk bytes: %w", err)
		}
		ev := b.raw[:n]
		b.emit(gjson.GetBytes(ev, "type").String(), ev)
	case eventstreamapi.ExceptionMessageType:
		name := headerString(msg.Headers, eventstreamapi.ExceptionTypeHeader)
		b.exc = &provider.CloudError{Status: exceptionStatus(name), Message: exceptionMessage(msg.Payload, name), Code: name}
	case eventstreamapi.ErrorMessageType:
		name := headerString(msg.Headers, eventstreamapi.ErrorCodeHeader)
		text := headerString(msg.Headers, eventstreamapi.ErrorMessageHeader)
		if text == "" {
			text = name
		}
		b.exc = &provider.CloudError{Status: exceptionStatus(name), Message: text, Code: name}
	default:
		return errors.New("bedrock: event stream: a frame without :message-type")
	}
	return nil
}

// emit writes one SSE event; data lines are split as SSE requires
// (Anthropic's events hold no raw newline, but a pretty-printed one would).
func (b *sseBody) emit(typ string, data []byte) {
	b.out.WriteString("event: ")
	b.out.WriteString(typ)
	b.out.WriteByte('\n')
	for {
		i := bytes.IndexByte(data, '\n')
		b.out.WriteString("data: ")
		if i < 0 {
			b.out.Write(data)
			b.out.WriteByte('\n')
			break
		}
		b.out.Write(bytes.TrimSuffix(data[:i], []byte{'\r'}))
		b.out.WriteByte('\n')
		data = data[i+1:]
	}
	b.out.WriteByte('\n')
}

// exceptionMessage is an exception frame's message ({"message":...}),
// else its name.
func exceptionMessage(payload []byte, name string) string {
	for _, k := range []string{"message", "Message"} {
		if m := gjson.GetBytes(payload, k); m.Exists() && m.String() != "" {
			return m.String()
		}
	}
	if name == "" {
		return "Bedrock ended the stream with an unnamed exception"
	}
	return name
}

func headerString(h eventstream.Headers, name string) string {
	if v := h.Get(name); v != nil {
		return v.String()
	}
	return ""
}
