package usage

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RetentionDays is how many UTC days of per-day usage are kept: a day
// older than that is deleted (durable keys carry no TTL).
const RetentionDays = 400

// DayRow is one tenant's usage of one model on one UTC day, for
// chargeback (GET /admin/usage).
type DayRow struct {
	Tenant string
	Day    string // YYYY-MM-DD, UTC
	Model  string // the model that answered, or "other" (as Counters.ByModel)
	ModelCounters
}

// dayKey names a tenant's model on a day.
type dayKey struct{ tenant, day, model string }

// Day names t's UTC day as the rows do.
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// addDaysLocked adds c's split by model to the rows of day.
func addDaysLocked(days map[dayKey]ModelCounters, tenant, day string, c Counters) {
	for model, mc := range c.ByModel {
		k := dayKey{tenant, day, model}
		cur := days[k]
		cur.add(mc)
		days[k] = cur
	}
}

// rowsOf returns the rows of tenants between from and to (UTC days,
// inclusive), sorted by tenant, day and model.
func rowsOf(days map[dayKey]ModelCounters, tenants []string, from, to string) []DayRow {
	want := make(map[string]bool, len(tenants))
	for _, t := range tenants {
		want[t] = true
	}
	var out []DayRow
	for k, c := range days {
		if want[k.tenant] && k.day >= from && k.day <= to {
			out = append(out, DayRow{Tenant: k.tenant, Day: k.day, Model: k.model, ModelCounters: c})
		}
	}
	sortRows(out)
	return out
}

func sortRows(rows []DayRow) {
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Tenant != b.Tenant {
			return a.Tenant < b.Tenant
		}
		if a.Day != b.Day {
			return a.Day < b.Day
		}
		return a.Model < b.Model
	})
}

// Days returns the per-day rows of tenants from from to to (UTC days,
// inclusive).
func (m *Memory) Days(_ context.Context, tenants []string, from, to time.Time) ([]DayRow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	return rowsOf(m.days, tenants, Day(from), Day(to)), nil
}

// pruneLocked deletes the days past retention.
func (m *Memory) pruneLocked() {
	oldest := Day(m.now().AddDate(0, 0, -RetentionDays+1))
	for k := range m.days {
		if k.day < oldest {
			delete(m.days, k)
		}
	}
}

// dayKeyName is the Redis hash of a tenant's day: corral:v1:usage:{<tenant>}:d:<day>,
// fields "<model>\x00<counter>" (a model name may hold a colon).
func dayKeyName(tenant, day string) string { return key(tenant) + ":d:" + day }

// Days reads the per-day rows of tenants from Redis (summed across
// instances) plus this instance's unflushed part, one pipeline.
func (r *Redis) Days(ctx context.Context, tenants []string, from, to time.Time) ([]DayRow, error) {
	r.moving.RLock() // see Get
	defer r.moving.RUnlock()
	ctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	var names []dayKey
	for _, t := range tenants {
		for d := from.UTC(); !d.After(to.UTC()); d = d.AddDate(0, 0, 1) {
			names = append(names, dayKey{tenant: t, day: Day(d)})
		}
	}
	cmds := make([]*redis.MapStringStringCmd, len(names))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			cmds[i] = p.HGetAll(ctx, dayKeyName(n.tenant, n.day))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("usage: redis days: %w", err)
	}
	all := map[dayKey]ModelCounters{}
	for i, n := range names {
		for field, v := range cmds[i].Val() {
			model, counter, ok := strings.Cut(field, "\x00")
			if !ok {
				continue
			}
			var c Counters
			c.set(modelFieldPrefix+model+":"+counter, v)
			addDaysLocked(all, n.tenant, n.day, c)
		}
	}
	local, _ := r.pending.Days(ctx, tenants, from, to)
	for _, row := range local {
		addDaysLocked(all, row.Tenant, row.Day, Counters{ByModel: map[string]ModelCounters{row.Model: row.ModelCounters}})
	}
	r.mu.Lock()
	for _, t := range tenants {
		if b := r.unsent[t]; b != nil {
			for k, mc := range b.days {
				addDaysLocked(all, k.tenant, k.day, Counters{ByModel: map[string]ModelCounters{k.model: mc}})
			}
		}
	}
	r.mu.Unlock()
	return rowsOf(all, tenants, Day(from), Day(to)), nil
}
