package console

import (
	"context"
	"sync"
	"time"
)

// sharedDays runs the Overview's read of every tenant's days once for all
// the pages that want it at the same time. That read is one Redis hash
// per tenant and day (30 × tenants for the chart), and every open
// Overview asks for it every 5 seconds: a page that asks while a read of
// the same days runs waits for it and shares its rows, so Redis sees at
// most one such read at a time however many tabs are open.
type sharedDays struct {
	mu    sync.Mutex // protects calls
	calls map[[2]int64]*daysCall
}

// daysCall is one read in progress; rows and err are set before done
// closes.
type daysCall struct {
	done chan struct{}
	rows []DayRow
	err  error
}

// usageDays is Backend.UsageDays, shared with the pages asking for the
// same days at the same time. The read runs on its own context, bounded
// by c.usageWait, so a page that leaves does not fail the others; a page
// stops waiting when its own context ends.
func (c *Console) usageDays(ctx context.Context, from, to time.Time) ([]DayRow, error) {
	key := [2]int64{from.Unix(), to.Unix()}
	c.days.mu.Lock()
	call, ok := c.days.calls[key]
	if !ok {
		call = &daysCall{done: make(chan struct{})}
		if c.days.calls == nil {
			c.days.calls = map[[2]int64]*daysCall{}
		}
		c.days.calls[key] = call
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.usageWait)
		go func() { // owned by this call; ends with the read, within usageWait
			defer cancel()
			call.rows, call.err = c.b.UsageDays(rctx, from, to)
			c.days.mu.Lock()
			delete(c.days.calls, key)
			c.days.mu.Unlock()
			close(call.done)
		}()
	}
	c.days.mu.Unlock()
	select {
	case <-call.done:
		return call.rows, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
