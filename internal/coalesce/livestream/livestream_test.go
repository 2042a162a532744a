package livestream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corralhq/corral/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAppendReadEnd(t *testing.T) {
	srv := redistest.Start(t)
	s := New(srv.Client(), Options{EndTTL: 5 * time.Second})
	ctx := context.Background()
	key := "corral:v1:{acme:h}:s"
	var first [][]byte
	for i := range 14 {
		first = append(first, fmt.Appendf(nil, "data: %d\n\n", i))
	}
	if err := s.Append(ctx, key, first); err != nil {
		t.Fatal(err)
	}
	// A late reader gets the 14 at once.
	b, err := s.Read(ctx, key, "0", 10*time.Millisecond)
	if err != nil || len(b.Events) != 14 || string(b.Events[13]) != "data: 13\n\n" || b.Ended {
		t.Fatalf("Read = %+v, %v", b, err)
	}
	// Then follows live: a blocked read returns when the next append lands.
	got := make(chan Batch, 1)
	go func() {
		nb, _ := s.Read(ctx, key, b.Next, 5*time.Second)
		got <- nb
	}()
	if err := s.Append(ctx, key, [][]byte{[]byte("data: 14\n\n")}); err != nil {
		t.Fatal(err)
	}
	nb := <-got
	if len(nb.Events) != 1 || string(nb.Events[0]) != "data: 14\n\n" {
		t.Fatalf("live read = %+v", nb)
	}
	if st, _ := s.Peek(ctx, key); st != Live {
		t.Errorf("Peek(live) = %v", st)
	}
	if err := s.End(ctx, key, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := s.Peek(ctx, key); st != Done {
		t.Errorf("Peek(done) = %v", st)
	}
	end, err := s.Read(ctx, key, nb.Next, 10*time.Millisecond)
	if err != nil || !end.Ended || end.Err != nil {
		t.Errorf("end = %+v, %v; want a clean end", end, err)
	}
	if ttl := srv.Client().PTTL(ctx, key).Val(); ttl <= 0 || ttl > 5*time.Second {
		t.Errorf("PTTL after end = %v; want the EndTTL", ttl)
	}
	// Nothing new: an empty batch after the block.
	if e, err := s.Read(ctx, key, end.Next, 10*time.Millisecond); err != nil || len(e.Events) != 0 || e.Ended {
		t.Errorf("read past the end = %+v, %v", e, err)
	}
}

func TestBrokenEnd(t *testing.T) {
	s := New(redistest.Client(t), Options{})
	ctx := context.Background()
	key := "corral:v1:{acme:b}:s"
	_ = s.Append(ctx, key, [][]byte{[]byte("data: x\n\n")})
	_ = s.End(ctx, key, errors.New("upstream cut"))
	b, err := s.Read(ctx, key, "0", 10*time.Millisecond)
	if err != nil || !b.Ended || !errors.Is(b.Err, ErrBroken) || len(b.Events) != 1 {
		t.Errorf("Read = %+v, %v; want the event then a broken end", b, err)
	}
	if st, _ := s.Peek(ctx, key); st != Broken {
		t.Errorf("Peek(broken) = %v", st)
	}
	if st, _ := s.Peek(ctx, "corral:v1:{acme:none}:s"); st != Absent {
		t.Errorf("Peek(absent) = %v", st)
	}
}

func TestLengthCap(t *testing.T) {
	srv := redistest.Start(t)
	s := New(srv.Client(), Options{MaxLen: 100})
	ctx := context.Background()
	key := "corral:v1:{acme:cap}:s"
	for range 20 {
		batch := make([][]byte, 100)
		for i := range batch {
			batch[i] = []byte("data: x\n\n")
		}
		if err := s.Append(ctx, key, batch); err != nil {
			t.Fatal(err)
		}
	}
	// Approximate trimming keeps it near the cap, never near the 2,000 added.
	if n := srv.Client().XLen(ctx, key).Val(); n > 300 {
		t.Errorf("XLEN = %d; want about 100", n)
	}
}

// Start's upstream and provider travel with the first event only: a
// reader from the start gets them, a reader joining after the first batch
// does not.
func TestStartRecordsTheUpstream(t *testing.T) {
	srv := redistest.Start(t)
	s := New(srv.Client(), Options{})
	ctx := context.Background()
	key := "corral:v1:{acme:u}:s"
	if err := s.Start(ctx, key, "openai-b", "azure", [][]byte{[]byte("data: 0\n\n"), []byte("data: 1\n\n")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, key, [][]byte{[]byte("data: 2\n\n")}); err != nil {
		t.Fatal(err)
	}
	b, err := s.Read(ctx, key, "0", 10*time.Millisecond)
	if err != nil || len(b.Events) != 3 || b.Upstream != "openai-b" || b.Provider != "azure" || string(b.Events[0]) != "data: 0\n\n" {
		t.Fatalf("Read from the start = %+v, %v; want 3 events from openai-b, provider azure", b, err)
	}
	first, _ := srv.Client().XRange(ctx, key, "-", "+").Result()
	later, err := s.Read(ctx, key, first[0].ID, 10*time.Millisecond)
	if err != nil || len(later.Events) != 2 || later.Upstream != "" || later.Provider != "" {
		t.Errorf("Read after the first event = %+v, %v; want 2 events and no upstream or provider", later, err)
	}
}
