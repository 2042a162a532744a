package logtest_test

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/corralhq/corral/internal/logtest"
)

// TestConcurrentWrites: lines written from many goroutines all arrive
// whole (run with -race, which also checks String and Count read safely
// while writes go on).
func TestConcurrentWrites(t *testing.T) {
	var buf logtest.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				log.Info("line", "writer", i, "n", j)
				_ = buf.Count("msg=line")
			}
		})
	}
	wg.Wait()
	if got := buf.Count("msg=line"); got != 8*50 {
		t.Errorf("Count = %d; want %d", got, 8*50)
	}
	if got := buf.Count("writer=3 n=49\n"); got != 1 {
		t.Errorf("writer 3's last line counted %d times; want 1:\n%s", got, buf.String())
	}
}

func ExampleBuffer() {
	var buf logtest.Buffer
	fmt.Fprintln(&buf, "redis down")
	fmt.Fprintln(&buf, "redis up")
	fmt.Println(buf.Count("redis"), buf.String() == "redis down\nredis up\n")
	// Output: 2 true
}
