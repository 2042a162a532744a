package console

import (
	"testing"
	"time"
)

// TestBoltRevocations: a sign-out is still known after the file is closed
// and opened again; the sign-outs of expired sessions are deleted, at the
// next sign-out and when the file is opened, so the file holds only live
// ones.
func TestBoltRevocations(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	b, err := OpenBoltRevocations(dir, clock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, r := range []struct {
		id    string
		until time.Duration
	}{{"short", time.Hour}, {"long", 12 * time.Hour}} {
		if err := b.Revoke(ctx, r.id, now.Add(r.until)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	if b, err = OpenBoltRevocations(dir, clock); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"short", "long"} {
		if got, err := b.Revoked(ctx, id); err != nil || !got {
			t.Errorf("after reopening, Revoked(%q) = %v, %v; want true", id, got, err)
		}
	}
	if got, _ := b.Revoked(ctx, "never"); got {
		t.Error("a session never signed out reads as revoked")
	}

	now = now.Add(time.Hour) // "short" has expired: its cookie is refused by its expiry
	if err := b.Revoke(ctx, "third", now.Add(12*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := b.Len(); n != 2 {
		t.Errorf("after a sign-out past one expiry: %d entries; want 2 (long, third)", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	now = now.Add(12 * time.Hour) // all have expired while no gateway ran
	if b, err = OpenBoltRevocations(dir, clock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if n := b.Len(); n != 0 {
		t.Errorf("opened after every session expired: %d entries; want 0", n)
	}
}
