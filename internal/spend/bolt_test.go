package spend

import (
	"context"
	"testing"
	"time"
)

// TestBoltLedgerSurvivesAReopen: spend and reservations written to
// spend.db are there after the file is closed and opened again (a
// restart): the budget is not re-granted, the view starts from the file,
// and a reservation left by the dead process still expires after its hold.
func TestBoltLedgerSurvivesAReopen(t *testing.T) {
	dir := t.TempDir()
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	o := LedgerOptions{Now: clk.now, Hold: 10 * time.Second}
	lim := Limits{Day: Cent}
	ctx := context.Background()
	l, closeFile, err := OpenBoltLedger(dir, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := l.Reserve(ctx, "acme", lim, 1000)
	if err != nil {
		t.Fatal(err)
	}
	l.Settle(ctx, r, 6_000_000)
	if _, _, err := l.Reserve(ctx, "acme", lim, 2_000_000); err != nil { // never settled: the process dies
		t.Fatal(err)
	}
	if err := closeFile(); err != nil {
		t.Fatal(err)
	}

	l, closeFile, err = OpenBoltLedger(dir, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFile()
	if st := l.Standing("acme", lim); st[0].Spent != 6_000_000 || st[0].Reserved != 2_000_000 {
		t.Errorf("view after the reopen: spent %s reserved %s; want $0.006 and $0.002", st[0].Spent, st[0].Reserved)
	}
	clk.set(clk.now().Add(11 * time.Second))
	st, _ := l.Read(ctx, "acme", lim)
	if st[0].Spent != 6_000_000 || st[0].Reserved != 0 {
		t.Errorf("past the hold: spent %s reserved %s; want $0.006 and nothing reserved", st[0].Spent, st[0].Reserved)
	}
	r, _, err = l.Reserve(ctx, "acme", lim, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Settle(ctx, r, 4_000_000)
	if _, _, err := l.Reserve(ctx, "acme", lim, 0); err == nil {
		t.Error("a reserve at $0.01 spent of $0.01 was allowed: the budget was re-granted")
	}
}
