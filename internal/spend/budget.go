package spend

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limits are a tenant's budgets per UTC calendar period; 0 = none.
type Limits struct {
	Day, Month Nanodollars
}

// Set reports whether l has any budget.
func (l Limits) Set() bool { return l.Day > 0 || l.Month > 0 }

// Period names.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Period is one budget's standing.
type Period struct {
	Name                   string // PeriodDay or PeriodMonth
	Limit, Spent, Reserved Nanodollars
	ResetsAt               time.Time // the next 00:00 UTC (day) or the 1st (month)
}

// Remaining is what is left of the budget, never below zero (calls in
// flight when it ran out may overrun it).
func (p Period) Remaining() Nanodollars { return max(p.Limit-p.Spent-p.Reserved, 0) }

// Standing is a tenant's budgets, the periods with a limit only.
type Standing []Period

// Remaining is the smallest remaining over the periods; ok is false when
// there is no budget.
func (s Standing) Remaining() (left Nanodollars, ok bool) {
	for i, p := range s {
		if i == 0 || p.Remaining() < left {
			left = p.Remaining()
		}
	}
	return left, len(s) > 0
}

// ExhaustedError refuses a call: spent plus reserved has reached Period's
// limit.
type ExhaustedError struct{ Period Period }

func (e *ExhaustedError) Error() string {
	p := e.Period
	return fmt.Sprintf("Budget exhausted: this key's %s budget of %s is used up (%s spent, %s reserved by calls in progress); it resets at %s.",
		p.Name, p.Limit, p.Spent, p.Reserved, p.ResetsAt.UTC().Format(time.RFC3339))
}

// Reservation is an estimate reserved before an upstream call; Settle
// replaces it with the call's actual cost.
type Reservation struct {
	Tenant     string
	Amount     Nanodollars
	id         string // names it in the store, so its release happens once
	day, month string // the periods it was reserved in
	local      bool   // reserved in this instance's view while Redis was away
}

// Ledger keeps spend against budgets. Reserve is the one decision per
// upstream call (one Redis round trip in distributed mode); Standing reads
// this instance's view and makes none, so a hit never waits on it.
type Ledger struct {
	store store
	now   func() time.Time
	id    string // this instance, for idempotent flushes and reservation ids
	seq   atomic.Uint64

	mu   sync.Mutex // protects view
	view map[string]*tenantView
}

// tenantView is what an instance knows of a tenant's spend: the figures the
// store last returned, plus what it spent itself since without the store
// (Redis away), which it flushes once the store answers again.
type tenantView struct {
	last    result
	pending Nanodollars // spent while the store was unreachable, not yet flushed
	// unsure are reservations whose reply was lost: the store may hold
	// them. Their release is retried with the next flush; releasing one
	// the store never got is a no-op.
	unsure []string
	seq    int64 // the last flush sequence number used
	// flushing is a flush in progress: its amount and sequence, retried
	// with the same sequence until the store confirms it.
	flushAmt Nanodollars
	flushSeq int64
}

// result is one answer of the budget script: the figures before its
// change and after.
type result struct {
	allowed                    bool
	day, month                 string
	spentD, resD, spentM, resM Nanodollars
	at                         time.Time
	after                      figures
}

// figures are a tenant's spent and reserved in the current periods.
type figures struct{ spentD, resD, spentM, resM Nanodollars }

// settled is res as it stands after the script's change: what an
// instance's view keeps, so a call that settled shows its cost, not its
// reservation.
func (res result) settled() result {
	res.spentD, res.resD, res.spentM, res.resM = res.after.spentD, res.after.resD, res.after.spentM, res.after.resM
	return res
}

// store runs the budget script's operations (budget.lua): Redis's, or an
// in-process twin for embedded mode.
type store interface {
	eval(ctx context.Context, tenant string, args ...any) (result, error)
}

// LedgerOptions configure a Ledger.
type LedgerOptions struct {
	// Now is the clock of the in-process store and, in tests, replaces
	// Redis TIME. Default time.Now for the memory store; Redis's TIME.
	Now func() time.Time
	// Instance names this instance in idempotent flushes. Default: random.
	Instance string
	// Hold is how long a reservation counts unless settled first: a call
	// whose instance died never settles, and its reservation is released
	// on its own after Hold (the longest an upstream call may take, plus a
	// margin). Default DefaultHold.
	Hold time.Duration
}

// DefaultHold is LedgerOptions.Hold's default: the default upstream
// timeout (120 s) and leader wait (10 s), plus a margin.
const DefaultHold = 135 * time.Second

// MaxCharge bounds what one call is charged (about $9 million): a usage
// figure no upstream can mean must not overflow the store's integers and
// leave the spend unrecorded.
const MaxCharge Nanodollars = 1 << 53

// NewMemoryLedger keeps spend in process (embedded mode).
func NewMemoryLedger(o LedgerOptions) *Ledger {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	return newLedger(&memStore{now: now, hold: holdOf(o), rows: map[string]map[string]int64{}, held: map[string]heldReservation{}}, now, o.Instance)
}

func holdOf(o LedgerOptions) time.Duration {
	if o.Hold <= 0 {
		return DefaultHold
	}
	return o.Hold
}

// NewRedisLedger keeps spend in Redis, in one durable hash per tenant
// (KeyPrefix), decided by one script run per call.
func NewRedisLedger(rdb redis.Scripter, o LedgerOptions) *Ledger {
	return newLedger(&redisStore{rdb: rdb, now: o.Now, hold: holdOf(o)}, o.Now, o.Instance)
}

func newLedger(s store, now func() time.Time, id string) *Ledger {
	if now == nil {
		now = time.Now
	}
	if id == "" {
		id = strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return &Ledger{store: s, now: now, id: id, view: map[string]*tenantView{}}
}

// Reserve decides whether tenant may make an upstream call under lim and,
// if so, reserves estimate. A refusal is an *ExhaustedError. When the store
// cannot be reached, the decision is this instance's: the last spend it
// read plus its own since; the error is then nil, and the reservation is
// local.
func (l *Ledger) Reserve(ctx context.Context, tenant string, lim Limits, estimate Nanodollars) (Reservation, Standing, error) {
	r := Reservation{Tenant: tenant, Amount: max(estimate, 0), id: l.nextID()}
	l.flush(ctx, tenant)
	res, err := l.store.eval(ctx, tenant, "reserve", int64(lim.Day), int64(lim.Month), int64(r.Amount), r.id)
	if err != nil {
		if r.Amount > 0 {
			l.mu.Lock()
			v := l.viewLocked(tenant)
			v.unsure = append(v.unsure, r.id)
			l.mu.Unlock()
		}
		return l.reserveLocally(r, lim)
	}
	l.remember(tenant, res.settled())
	st := standing(res, lim)
	r.day, r.month = res.day, res.month
	if !res.allowed {
		return Reservation{}, st, exhausted(st, lim)
	}
	return r, st, nil
}

// reserveLocally decides against this instance's view while the store is
// away.
func (l *Ledger) reserveLocally(r Reservation, lim Limits) (Reservation, Standing, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.viewLocked(r.Tenant)
	res := v.local(l.now())
	st := standing(res, lim)
	if err := exhausted(st, lim); err != nil {
		return Reservation{}, st, err
	}
	r.local, r.day, r.month = true, res.day, res.month
	v.last.resD += r.Amount
	v.last.resM += r.Amount
	return r, st, nil
}

// Settle replaces r with the call's actual cost. r may be the zero
// Reservation with only Tenant set: a call nobody reserved for (a
// background refresh) is charged all the same. Spend the store cannot
// take now is kept and added once it answers again, exactly once.
func (l *Ledger) Settle(ctx context.Context, r Reservation, actual Nanodollars) {
	actual = min(max(actual, 0), MaxCharge)
	if !r.local {
		res, err := l.store.eval(ctx, r.Tenant, "settle", r.id, int64(actual))
		if err == nil {
			l.remember(r.Tenant, res.settled())
			return
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.viewLocked(r.Tenant)
	if !r.local && r.id != "" {
		v.unsure = append(v.unsure, r.id) // the store may still hold it
	}
	if r.day == v.last.day {
		v.last.resD = max(v.last.resD-r.Amount, 0)
	}
	if r.month == v.last.month {
		v.last.resM = max(v.last.resM-r.Amount, 0)
	}
	v.pending += actual
}

// flush adds what this instance spent while the store was away, once.
func (l *Ledger) flush(ctx context.Context, tenant string) {
	l.mu.Lock()
	v := l.view[tenant]
	if v == nil || (v.pending == 0 && v.flushAmt == 0 && len(v.unsure) == 0) {
		l.mu.Unlock()
		return
	}
	unsure := v.unsure
	v.unsure = nil
	l.mu.Unlock()
	for i, id := range unsure {
		if _, err := l.store.eval(ctx, tenant, "settle", id, int64(0)); err != nil {
			l.mu.Lock()
			v.unsure = append(v.unsure, unsure[i:]...)
			l.mu.Unlock()
			return
		}
	}
	l.mu.Lock()
	if v.pending == 0 && v.flushAmt == 0 {
		l.mu.Unlock()
		return
	}
	if v.flushAmt == 0 { // start a new flush; a failed one is retried as it was
		v.seq++
		v.flushAmt, v.flushSeq, v.pending = v.pending, v.seq, 0
	}
	amt, seq := v.flushAmt, v.flushSeq
	l.mu.Unlock()
	if _, err := l.store.eval(ctx, tenant, "flush", l.id, seq, int64(amt)); err != nil {
		return // kept, and retried with the same sequence number
	}
	l.mu.Lock()
	if v.flushSeq == seq {
		v.flushAmt = 0
	}
	l.mu.Unlock()
}

// Flush adds every tenant's unflushed spend to the store now; the server
// calls it when Redis is back, so spend made during an outage lands even
// if the tenant makes no further call.
func (l *Ledger) Flush(ctx context.Context) {
	l.mu.Lock()
	tenants := make([]string, 0, len(l.view))
	for t := range l.view {
		tenants = append(tenants, t)
	}
	l.mu.Unlock()
	for _, t := range tenants {
		l.flush(ctx, t)
	}
}

// Standing is this instance's view of tenant's budgets under lim, with no
// I/O: the last figures read plus its own spend since.
func (l *Ledger) Standing(tenant string, lim Limits) Standing {
	if !lim.Set() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.view[tenant]
	if v == nil {
		return standing(result{}.at0(l.now()), lim)
	}
	return standing(v.local(l.now()), lim)
}

// Read asks the store for tenant's budgets (the usage API).
func (l *Ledger) Read(ctx context.Context, tenant string, lim Limits) (Standing, error) {
	l.flush(ctx, tenant)
	res, err := l.store.eval(ctx, tenant, "read")
	if err != nil {
		return l.Standing(tenant, lim), fmt.Errorf("spend: read: %w", err)
	}
	l.remember(tenant, res.settled())
	return l.Standing(tenant, lim), nil
}

// nextID names a reservation: this instance and a counter.
func (l *Ledger) nextID() string {
	return l.id + "-" + strconv.FormatUint(l.seq.Add(1), 36)
}

func (l *Ledger) remember(tenant string, res result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.viewLocked(tenant).last = res
}

func (l *Ledger) viewLocked(tenant string) *tenantView {
	v := l.view[tenant]
	if v == nil {
		v = &tenantView{last: result{}.at0(l.now())}
		l.view[tenant] = v
	}
	return v
}

// local is the view at now: the last figures, rolled over when the period
// changed since, plus the unflushed spend.
func (v *tenantView) local(now time.Time) result {
	r := v.last
	day, month := periods(now)
	if r.day != day {
		r.day, r.spentD, r.resD = day, 0, 0
	}
	if r.month != month {
		r.month, r.spentM, r.resM = month, 0, 0
	}
	extra := v.pending + v.flushAmt
	r.spentD += extra
	r.spentM += extra
	r.at = now
	return r
}

func (r result) at0(now time.Time) result {
	r.day, r.month = periods(now)
	r.at = now
	return r
}

// periods names the UTC day and month of t as the script does.
func periods(t time.Time) (day, month string) {
	t = t.UTC()
	return t.Format("2006-01-02"), t.Format("2006-01")
}

func standing(r result, lim Limits) Standing {
	var st Standing
	at := r.at.UTC()
	if lim.Day > 0 {
		st = append(st, Period{Name: PeriodDay, Limit: lim.Day, Spent: r.spentD, Reserved: r.resD,
			ResetsAt: time.Date(at.Year(), at.Month(), at.Day()+1, 0, 0, 0, 0, time.UTC)})
	}
	if lim.Month > 0 {
		st = append(st, Period{Name: PeriodMonth, Limit: lim.Month, Spent: r.spentM, Reserved: r.resM,
			ResetsAt: time.Date(at.Year(), at.Month()+1, 1, 0, 0, 0, 0, time.UTC)})
	}
	return st
}

// exhausted is the refusal for the first period whose spent plus reserved
// has reached its limit; nil when none has.
func exhausted(st Standing, _ Limits) error {
	for _, p := range st {
		if p.Spent+p.Reserved >= p.Limit {
			return &ExhaustedError{Period: p}
		}
	}
	return nil
}

// KeyPrefix starts every tenant's spend hash: corral:v1:spend:{<tenant>}.
const KeyPrefix = "corral:v1:spend:"

func spendKey(tenant string) string { return KeyPrefix + "{" + tenant + "}" }

// heldKey is the tenant's reservation deadlines, in its spend hash's slot.
func heldKey(tenant string) string { return spendKey(tenant) + ":held" }

//go:embed budget.lua
var budgetSource string

var budgetScript = redis.NewScript(budgetSource)

type redisStore struct {
	rdb  redis.Scripter
	now  func() time.Time // replaces TIME in tests; nil = Redis's clock
	hold time.Duration
}

func (s *redisStore) eval(ctx context.Context, tenant string, args ...any) (result, error) {
	for len(args) < 5 {
		args = append(args, "")
	}
	at := ""
	if s.now != nil {
		at = strconv.FormatInt(s.now().Unix(), 10)
	}
	args = append(args, at, int64((s.hold+time.Second-1)/time.Second))
	v, err := budgetScript.Run(ctx, s.rdb, []string{spendKey(tenant), heldKey(tenant)}, args...).Slice()
	if err != nil {
		return result{}, fmt.Errorf("spend: budget script: %w", err)
	}
	if len(v) != 12 {
		return result{}, errors.New("spend: budget script: unexpected reply")
	}
	n := func(i int) Nanodollars { x, _ := v[i].(int64); return Nanodollars(x) }
	day, _ := v[1].(string)
	month, _ := v[2].(string)
	now, _ := v[7].(int64)
	return result{allowed: n(0) == 1, day: day, month: month, spentD: n(3), resD: n(4), spentM: n(5), resM: n(6), at: time.Unix(now, 0),
		after: figures{n(8), n(9), n(10), n(11)}}, nil
}

// memStore is budget.lua in process, for embedded mode.
type memStore struct {
	now  func() time.Time
	hold time.Duration
	mu   sync.Mutex // protects rows and held
	rows map[string]map[string]int64
	held map[string]heldReservation // by reservation id
	// save, when set, keeps a tenant's figures and reservations durable
	// after each change (embedded mode's data dir); it runs under mu.
	save func(tenant string, row map[string]int64, held map[string]heldReservation)
}

// heldReservation is a reservation the memory store holds until it is
// settled or its deadline passes.
type heldReservation struct {
	Tenant   string `json:"tenant"`
	Day      string `json:"day"`
	Month    string `json:"month"`
	Amount   int64  `json:"amount"`
	Deadline int64  `json:"deadline"` // Unix seconds
}

func (s *memStore) eval(_ context.Context, tenant string, args ...any) (result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	day, month := periods(now)
	h := s.rows[tenant]
	if h == nil {
		h = map[string]int64{}
		s.rows[tenant] = h
	}
	changed := false
	// The rows hold one day and one month: a new period starts at zero.
	if h["day"] != dayNumber(now) {
		h["day"], h["ds"], h["dr"] = dayNumber(now), 0, 0
		changed = true
	}
	if h["month"] != monthNumber(now) {
		h["month"], h["ms"], h["mr"] = monthNumber(now), 0, 0
		changed = true
	}
	release := func(id string) {
		x, ok := s.held[id]
		if !ok || x.Tenant != tenant {
			return
		}
		delete(s.held, id)
		if x.Day == day {
			h["dr"] -= min(x.Amount, h["dr"])
		}
		if x.Month == month {
			h["mr"] -= min(x.Amount, h["mr"])
		}
		changed = true
	}
	for id, x := range s.held {
		if x.Tenant == tenant && x.Deadline < now.Unix() {
			release(id)
		}
	}
	res := result{allowed: true, day: day, month: month, spentD: Nanodollars(h["ds"]), resD: Nanodollars(h["dr"]),
		spentM: Nanodollars(h["ms"]), resM: Nanodollars(h["mr"]), at: now}
	arg := func(i int) int64 {
		if i >= len(args) {
			return 0
		}
		switch x := args[i].(type) {
		case int64:
			return x
		case int:
			return int64(x)
		}
		return 0
	}
	str := func(i int) string {
		if i >= len(args) {
			return ""
		}
		s, _ := args[i].(string)
		return s
	}
	switch args[0] {
	case "reserve":
		limD, limM, est := arg(1), arg(2), arg(3)
		if (limD > 0 && h["ds"]+h["dr"] >= limD) || (limM > 0 && h["ms"]+h["mr"] >= limM) {
			res.allowed = false
		} else if est > 0 {
			h["dr"] += est
			h["mr"] += est
			s.held[str(4)] = heldReservation{Tenant: tenant, Day: day, Month: month, Amount: est,
				Deadline: now.Unix() + max(int64((s.hold+time.Second-1)/time.Second), 1)}
			changed = true
		}
	case "settle":
		release(str(1))
		if a := arg(2); a > 0 {
			h["ds"] += a
			h["ms"] += a
			changed = true
		}
	}
	res.after = figures{Nanodollars(h["ds"]), Nanodollars(h["dr"]), Nanodollars(h["ms"]), Nanodollars(h["mr"])}
	if changed && s.save != nil {
		mine := map[string]heldReservation{}
		for id, x := range s.held {
			if x.Tenant == tenant {
				mine[id] = x
			}
		}
		// The whole tenant is written each time: a write that failed
		// (the save logs it) is made good by the next one, and memory
		// stays the truth meanwhile.
		s.save(tenant, h, mine)
	}
	return res, nil
}

func dayNumber(t time.Time) int64 { return t.Unix()/86400 + 1 } // +1: never the zero value

func monthNumber(t time.Time) int64 {
	t = t.UTC()
	return int64(t.Year())*12 + int64(t.Month())
}
