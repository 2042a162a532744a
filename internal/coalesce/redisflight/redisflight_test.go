package redisflight

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/coalesce/livestream"
	"github.com/corralhq/corral/internal/redistest"
)

// A live stream its leader's shutdown ended reads on another instance as
// coalesce.ErrShutdown (the followers are told to retry) and as a broken
// stream, with the end's own text once: it reaches the access log.
func TestShutdownEndReadsAsShutdown(t *testing.T) {
	s := &Streams{s: livestream.New(redistest.Client(t), livestream.Options{})}
	ctx := context.Background()
	for _, tt := range []struct {
		name     string
		cause    error
		shutdown bool
	}{
		{"shutdown", errors.Join(errors.New("flight"), coalesce.ErrShutdown), true},
		{"upstream cut", errors.New("upstream: connection reset"), false},
	} {
		key := "corral:v1:{acme:" + tt.name + "}:s"
		if err := s.Start(ctx, key, coalesce.StreamOrigin{Upstream: "openai", Provider: "openai"}, [][]byte{[]byte("data: 0\n\n")}); err != nil {
			t.Fatal(err)
		}
		if err := s.End(ctx, key, tt.cause); err != nil {
			t.Fatal(err)
		}
		b, err := s.Read(ctx, key, "0", 10*time.Millisecond)
		if err != nil || !b.Ended || b.Err == nil {
			t.Fatalf("%s: Read = %+v, %v; want a broken end", tt.name, b, err)
		}
		if got := errors.Is(b.Err, coalesce.ErrShutdown); got != tt.shutdown {
			t.Errorf("%s: errors.Is(%v, ErrShutdown) = %v; want %v", tt.name, b.Err, got, tt.shutdown)
		}
		if !errors.Is(b.Err, livestream.ErrBroken) {
			t.Errorf("%s: %v is not livestream.ErrBroken", tt.name, b.Err)
		}
		if tt.shutdown {
			if want := livestream.ErrBroken.Error() + ": " + coalesce.ErrShutdown.Error(); b.Err.Error() != want {
				t.Errorf("%s: error text %q; want %q", tt.name, b.Err, want)
			}
		}
		if b.Upstream != "openai" || b.Provider != "openai" {
			t.Errorf("%s: upstream %q provider %q; want openai, openai", tt.name, b.Upstream, b.Provider)
		}
	}
}
