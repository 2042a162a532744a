package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestEventReader(t *testing.T) {
	tests := []struct {
		name    string
		give    string
		want    []string
		wantErr error
	}{
		{"two events", "data: a\n\ndata: b\n\n", []string{"data: a\n\n", "data: b\n\n"}, io.EOF},
		{"crlf", "data: a\r\n\r\n", []string{"data: a\r\n\r\n"}, io.EOF},
		{"multi-line event", "event: x\ndata: 1\ndata: 2\n\n", []string{"event: x\ndata: 1\ndata: 2\n\n"}, io.EOF},
		{"stray blank lines", "\n\ndata: a\n\n\n", []string{"data: a\n\n"}, io.EOF},
		{"cut inside an event", "data: a\n\ndata: b", []string{"data: a\n\n", "data: b"}, io.ErrUnexpectedEOF},
		{"empty", "", nil, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			er := NewEventReader(strings.NewReader(tt.give))
			var got []string
			var err error
			for {
				var ev []byte
				ev, err = er.Next()
				if ev != nil {
					got = append(got, string(ev))
				}
				if err != nil {
					break
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || !errors.Is(err, tt.wantErr) {
				t.Errorf("events = %q, err = %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestEventReaderTooLarge(t *testing.T) {
	er := NewEventReader(strings.NewReader("data: " + strings.Repeat("x", MaxEventBytes+10) + "\n\n"))
	if _, err := er.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("err = %v; want ErrEventTooLarge", err)
	}
}

func TestData(t *testing.T) {
	tests := []struct{ give, want string }{
		{"data: [DONE]\n\n", "[DONE]"},
		{"data:x\n\n", "x"},
		{"event: e\ndata: 1\r\ndata: 2\n\n", "1\n2"},
		{": comment\n\n", ""},
	}
	for _, tt := range tests {
		if got := string(Data([]byte(tt.give))); got != tt.want {
			t.Errorf("Data(%q) = %q; want %q", tt.give, got, tt.want)
		}
	}
}

// An event longer than the reader's buffer (a big tool-call argument in
// one chunk) is read whole, unchanged, and the next event after it too.
func TestEventReaderEventLongerThanBuffer(t *testing.T) {
	big := "data: " + strings.Repeat("y", 5*readBufferSize+7) + "\n\n"
	er := NewEventReader(strings.NewReader(big + "data: [DONE]\n\n"))
	got, err := er.Next()
	if err != nil || string(got) != big {
		t.Fatalf("Next = %d bytes, %v; want the %d-byte event", len(got), err, len(big))
	}
	got, err = er.Next()
	if err != nil || string(got) != "data: [DONE]\n\n" {
		t.Fatalf("second Next = %q, %v", got, err)
	}
	if _, err := er.Next(); err != io.EOF {
		t.Fatalf("third Next = %v, want io.EOF", err)
	}
}

// TestTyped: a framed event is the exact bytes the Responses and Messages
// APIs send, and reads back through EventReader, Type and Data unchanged.
func TestTyped(t *testing.T) {
	data := []byte(`{"type":"error","message":"cut"}`)
	got := Typed("error", data)
	const want = "event: error\ndata: {\"type\":\"error\",\"message\":\"cut\"}\n\n"
	if string(got) != want {
		t.Fatalf("Typed = %q; want %q", got, want)
	}
	if len(got) != cap(got) {
		t.Errorf("Typed: len %d, cap %d; want an exactly sized event", len(got), cap(got))
	}
	ev, err := NewEventReader(strings.NewReader(string(got))).Next()
	if err != nil || string(ev) != want {
		t.Fatalf("EventReader.Next = %q, %v; want %q", ev, err, want)
	}
	if typ := Type(ev); typ != "error" {
		t.Errorf("Type = %q; want %q", typ, "error")
	}
	if d := Data(ev); string(d) != string(data) {
		t.Errorf("Data = %q; want %q", d, data)
	}
}

// A data line whose length, newline aside, is a multiple of the read buffer
// comes in pieces whose last is the bare line ending: that ends the line,
// not the event. Every length around the first four multiples, LF and
// CRLF, ends each event at its own blank line.
func TestEventReaderLineEndingAtBufferBoundary(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n"} {
		for k := 1; k <= 4; k++ {
			for d := -2; d <= 2; d++ {
				n := k*readBufferSize + d - len("data: ")
				first := "data: " + strings.Repeat("x", n) + eol + eol
				second := "data: {\"next\":true}" + eol + eol
				er := NewEventReader(strings.NewReader(first + second))
				got, err := er.Next()
				if err != nil || string(got) != first {
					t.Fatalf("eol %q, line of %d bytes: Next = %d bytes ending %q, %v; want the %d-byte event",
						eol, n+len("data: "), len(got), got[max(0, len(got)-12):], err, len(first))
				}
				if got, err := er.Next(); err != nil || string(got) != second {
					t.Fatalf("eol %q, line of %d bytes: second Next = %q, %v", eol, n+len("data: "), got, err)
				}
				if _, err := er.Next(); err != io.EOF {
					t.Fatalf("third Next = %v, want io.EOF", err)
				}
			}
		}
	}
}
