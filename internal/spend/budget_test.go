package spend

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/redistest"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// ledgers runs f on the in-process ledger and on a real redis-server's,
// both on clk.
func ledgers(t *testing.T, clk *clock, f func(t *testing.T, l *Ledger)) {
	t.Run("memory", func(t *testing.T) { f(t, NewMemoryLedger(LedgerOptions{Now: clk.now})) })
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		f(t, NewRedisLedger(srv.Client(), LedgerOptions{Now: clk.now}))
	})
}

func TestLedgerReservesSettlesAndRefuses(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	ledgers(t, clk, func(t *testing.T, l *Ledger) {
		ctx := context.Background()
		lim := Limits{Day: Cent} // $0.01 = 10,000,000 nano-dollars
		var rs []Reservation
		for range 3 { // 0, 4M, 8M reserved before each: all under $0.01
			r, _, err := l.Reserve(ctx, "acme", lim, 4_000_000)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		_, st, err := l.Reserve(ctx, "acme", lim, 4_000_000) // 12M reserved: refused
		var ee *ExhaustedError
		if !errors.As(err, &ee) || ee.Period.Name != PeriodDay || st[0].Reserved != 12_000_000 {
			t.Fatalf("fourth reserve: %v, %+v; want the day budget exhausted with 12M reserved", err, st)
		}
		want := "Budget exhausted: this key's day budget of $0.01 is used up ($0.00 spent, $0.012 reserved by calls in progress); it resets at 2026-12-02T00:00:00Z."
		if err.Error() != want {
			t.Errorf("message = %q\nwant      %q", err.Error(), want)
		}
		for _, r := range rs {
			l.Settle(ctx, r, 3_000_000)
		}
		r, st, err := l.Reserve(ctx, "acme", lim, 4_000_000) // 9M spent: allowed
		if err != nil || st[0].Spent != 9_000_000 || st[0].Reserved != 0 {
			t.Fatalf("after settling: %v %+v; want 9M spent, nothing reserved", err, st)
		}
		if left, _ := st.Remaining(); left != 1_000_000 {
			t.Errorf("remaining = %s; want $0.001", left)
		}
		l.Settle(ctx, r, 3_000_000) // 12M spent: overrun by the call in flight only
		if _, _, err := l.Reserve(ctx, "acme", lim, 0); !errors.As(err, &ee) {
			t.Fatalf("over the budget: %v; want refused", err)
		}
		if got, _ := l.Standing("acme", lim).Remaining(); got != 0 {
			t.Errorf("standing remaining = %s; want 0", got)
		}
		// Another tenant is not affected.
		if _, _, err := l.Reserve(ctx, "other", lim, 1); err != nil {
			t.Errorf("another tenant: %v", err)
		}
	})
}

// TestLedgerPeriodsRollOnTheClock: a day budget resets at 00:00 UTC and a
// month budget on the 1st, on the injected clock (which replaces Redis
// TIME).
func TestLedgerPeriodsRollOnTheClock(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 31, 23, 59, 59, 0, time.UTC)}
	ledgers(t, clk, func(t *testing.T, l *Ledger) {
		ctx := context.Background()
		clk.set(time.Date(2026, 1, 31, 23, 59, 59, 0, time.UTC))
		day := Limits{Day: 100}
		r, _, err := l.Reserve(ctx, "d", day, 0)
		if err != nil {
			t.Fatal(err)
		}
		l.Settle(ctx, r, 100)
		if _, _, err := l.Reserve(ctx, "d", day, 0); err == nil {
			t.Fatal("day budget spent, call allowed")
		}
		month := Limits{Month: 100}
		r, _, _ = l.Reserve(ctx, "m", month, 0)
		l.Settle(ctx, r, 100)
		clk.set(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
		if _, st, err := l.Reserve(ctx, "d", day, 0); err != nil || st[0].Spent != 0 {
			t.Errorf("a new day: %v %+v; want allowed from zero", err, st)
		}
		if _, st, err := l.Reserve(ctx, "m", month, 0); err != nil || st[0].Spent != 0 {
			t.Errorf("the 1st: %v %+v; want the month from zero", err, st)
		}
		// Within the month, a new day keeps the month's spend.
		r, _, _ = l.Reserve(ctx, "m", month, 0)
		l.Settle(ctx, r, 60)
		clk.set(time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC))
		if _, st, _ := l.Reserve(ctx, "m", month, 0); st[0].Spent != 60 || !st[0].ResetsAt.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("next day, same month: %+v; want 60 spent, reset on March 1st", st)
		}
	})
}

// TestRedisSpendIsDurable: the spend hash has no TTL and keeps only the
// current periods; retention is the script deleting the old ones.
func TestRedisSpendIsDurable(t *testing.T) {
	srv := redistest.Start(t)
	clk := &clock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	l := NewRedisLedger(srv.Client(), LedgerOptions{Now: clk.now})
	ctx := context.Background()
	r, _, _ := l.Reserve(ctx, "acme", Limits{Day: Dollar}, 5)
	l.Settle(ctx, r, 7)
	key := KeyPrefix + "{acme}"
	if ttl := srv.Client().TTL(ctx, key).Val(); ttl != -1 {
		t.Errorf("TTL = %v; want none (-1)", ttl)
	}
	clk.set(time.Date(2027, 1, 2, 0, 0, 1, 0, time.UTC))
	r, _, _ = l.Reserve(ctx, "acme", Limits{Day: Dollar}, 0)
	l.Settle(ctx, r, 3)
	got := srv.Client().HGetAll(ctx, key).Val()
	want := map[string]string{"d": "2027-01-02", "m": "2027-01", "d:2027-01-02:s": "3", "m:2027-01:s": "3"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q; want %q (hash %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("hash = %v; want only the current periods", got)
	}
}

// TestLedgerThroughARedisOutage: with redis-server stopped (SIGSTOP) the
// ledger decides against the last spend it read plus its own since, and
// when it runs again the spend made meanwhile is added exactly once, even
// if a flush is retried.
func TestLedgerThroughARedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Stoppable() {
		t.Skip("external Redis")
	}
	opt, _ := redis.ParseURL(srv.URL())
	opt.ReadTimeout, opt.WriteTimeout, opt.DialTimeout, opt.MaxRetries = 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond, -1
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	l := NewRedisLedger(rdb, LedgerOptions{Instance: "a"})
	other := NewRedisLedger(srv.Client(), LedgerOptions{Instance: "b"})
	ctx := context.Background()
	lim := Limits{Day: 100}
	var total Nanodollars
	spendOn := func(l *Ledger, cost Nanodollars) error {
		r, _, err := l.Reserve(ctx, "acme", lim, 10)
		if err != nil {
			return err
		}
		l.Settle(ctx, r, cost)
		total += cost
		return nil
	}
	for _, c := range []Nanodollars{20, 15} {
		if err := spendOn(l, c); err != nil {
			t.Fatal(err)
		}
	}
	if err := spendOn(other, 5); err != nil { // another instance: 40 in Redis
		t.Fatal(err)
	}
	srv.Pause()
	// Redis away: the last spend read (35 after l's last settle) plus its own.
	for _, c := range []Nanodollars{30, 30} {
		if err := spendOn(l, c); err != nil {
			t.Fatalf("during the outage: %v", err)
		}
	}
	// 35 + 60 = 95 < 100 still allowed; 95 + 10 more is not.
	if err := spendOn(l, 10); err != nil {
		t.Fatalf("during the outage: %v", err)
	}
	var ee *ExhaustedError
	if _, _, err := l.Reserve(ctx, "acme", lim, 1); !errors.As(err, &ee) {
		t.Fatalf("during the outage at 105 of 100: %v; want refused", err)
	}
	srv.Resume()
	l.Flush(ctx)
	l.Flush(ctx) // nothing left: no double count
	// A flush whose reply was lost is retried with its sequence number.
	if _, err := l.store.eval(ctx, "acme", "flush", "a", int64(1), int64(70)); err != nil {
		t.Fatal(err)
	}
	st, err := other.Read(ctx, "acme", lim)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Spent != total || st[0].Reserved != 0 {
		t.Fatalf("Redis spent %s reserved %s; want every call's cost, %s, and nothing reserved", st[0].Spent, st[0].Reserved, total)
	}
}

// TestLedgerViewShowsTheCostOnceSettled: after a call settles, this
// instance's view (what x-corral-budget-remaining-usd is read from)
// holds its cost, not its reservation.
func TestLedgerViewShowsTheCostOnceSettled(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	ledgers(t, clk, func(t *testing.T, l *Ledger) {
		ctx := context.Background()
		lim := Limits{Day: Cent}
		r, _, err := l.Reserve(ctx, "acme", lim, 1_270_000)
		if err != nil {
			t.Fatal(err)
		}
		if left, _ := l.Standing("acme", lim).Remaining(); left != Cent-1_270_000 {
			t.Errorf("while the call runs: %s left; want %s (its reservation deducted)", left, Cent-1_270_000)
		}
		l.Settle(ctx, r, 1_020_000)
		st := l.Standing("acme", lim)
		if left, _ := st.Remaining(); left != Cent-1_020_000 || st[0].Spent != 1_020_000 || st[0].Reserved != 0 {
			t.Errorf("settled: %s left (spent %s, reserved %s); want %s left, its cost spent, nothing reserved",
				left, st[0].Spent, st[0].Reserved, Cent-1_020_000)
		}
	})
}

// TestLedgerReservationsExpire: a reservation never settled (its instance
// died mid-call) stops counting once its hold has passed, on every
// instance; settling it late charges the cost and releases nothing twice.
func TestLedgerReservationsExpire(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	hold := 30 * time.Second
	lim := Limits{Day: Cent, Month: Dollar}
	check := func(t *testing.T, l *Ledger, reserved Nanodollars, spent Nanodollars) {
		t.Helper()
		st, err := l.Read(context.Background(), "acme", lim)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range st {
			if p.Reserved != reserved || p.Spent != spent {
				t.Errorf("%s: reserved %s spent %s; want reserved %s spent %s", p.Name, p.Reserved, p.Spent, reserved, spent)
			}
		}
	}
	run := func(t *testing.T, dying, other *Ledger) {
		ctx := context.Background()
		r, _, err := dying.Reserve(ctx, "acme", lim, Cent) // the whole day's budget
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := other.Reserve(ctx, "acme", lim, 1); err == nil {
			t.Fatal("a second call while the first holds the day's budget was allowed")
		}
		check(t, other, Cent, 0)
		clk.set(clk.now().Add(hold)) // at the deadline: still held
		check(t, other, Cent, 0)
		clk.set(clk.now().Add(time.Second)) // past it: released, for everyone
		check(t, other, 0, 0)
		r2, _, err := other.Reserve(ctx, "acme", lim, 1000)
		if err != nil {
			t.Fatalf("after the dead call's hold: %v; want allowed", err)
		}
		dying.Settle(ctx, r, 500) // a late settle: its cost counts, no release twice
		check(t, other, 1000, 500)
		other.Settle(ctx, r2, 700)
		check(t, other, 0, 1200)
	}
	t.Run("memory", func(t *testing.T) {
		l := NewMemoryLedger(LedgerOptions{Now: clk.now, Hold: hold})
		run(t, l, l)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		run(t, NewRedisLedger(srv.Client(), LedgerOptions{Now: clk.now, Hold: hold, Instance: "a"}),
			NewRedisLedger(srv.Client(), LedgerOptions{Now: clk.now, Hold: hold, Instance: "b"}))
		if n := srv.Client().Exists(context.Background(), KeyPrefix+"{acme}:held").Val(); n != 0 {
			t.Errorf("the deadlines' set outlives its reservations")
		}
	})
}
