package server

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/usage"
)

// dayRowJSON is one row of GET /admin/usage: a tenant's model on a UTC day.
type dayRowJSON struct {
	Tenant string `json:"tenant"`
	Day    string `json:"day"`
	Model  string `json:"model"`
	modelUsageJSON
}

// usageColumns are the CSV columns, in the JSON rows' order.
var usageColumns = []string{"tenant", "day", "model", "requests", "upstream_calls", "input_tokens", "output_tokens", "cost_usd", "saved_usd"}

// handleUsageDays answers GET /admin/usage?from=YYYY-MM-DD&to=YYYY-MM-DD:
// one row per tenant, UTC day and model, summed across instances, in JSON
// or, with Accept: text/csv, CSV for chargeback.
func (s *Server) handleUsageDays(w http.ResponseWriter, r *http.Request) {
	from, aerr := usageDay(r, "from")
	if aerr == nil {
		var to time.Time
		if to, aerr = usageDay(r, "to"); aerr == nil {
			switch {
			case to.Before(from):
				aerr = errInvalidRequest("to must not be before from.", "to")
			case to.Sub(from) >= usage.RetentionDays*24*time.Hour:
				aerr = errInvalidRequest("At most "+strconv.Itoa(usage.RetentionDays)+" days are kept; ask for fewer.", "from")
			default:
				s.writeUsageDays(w, r, from, to)
				return
			}
		}
	}
	writeError(w, aerr)
}

func usageDay(r *http.Request, name string) (time.Time, *apiError) {
	v := r.URL.Query().Get(name)
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, errInvalidRequest(name+" must be a UTC day, YYYY-MM-DD.", name)
	}
	return t, nil
}

func (s *Server) writeUsageDays(w http.ResponseWriter, r *http.Request, from, to time.Time) {
	out, aerr := s.usageDays(r.Context(), from, to)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if !strings.Contains(r.Header.Get("Accept"), "text/csv") {
		writeJSON(w, struct {
			From string       `json:"from"`
			To   string       `json:"to"`
			Rows []dayRowJSON `json:"rows"`
		}{usage.Day(from), usage.Day(to), out})
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	bw := bufio.NewWriter(w)
	_, _ = bw.WriteString(strings.Join(usageColumns, ",") + "\n")
	var line []byte
	for _, row := range out {
		line = line[:0]
		for _, c := range []string{row.Tenant, row.Day, row.Model} {
			line = appendCSVText(line, c)
			line = append(line, ',')
		}
		for _, v := range []int64{row.Requests, row.UpstreamCalls, row.InputTokens, row.OutputTokens} {
			line = strconv.AppendInt(line, v, 10)
			line = append(line, ',')
		}
		line = append(line, row.CostUSD.USD()...)
		line = append(line, ',')
		line = append(line, row.SavedUSD.USD()...)
		line = append(line, '\n')
		_, _ = bw.Write(line)
	}
	_ = bw.Flush()
}

// appendCSVText appends s as a text cell of the CSV export. A spreadsheet
// opening the file would run a cell that starts with =, +, - or @ as a
// formula (-2-3 included), and one that starts with a tab, CR or NUL after
// stripping it, so such a cell gets a leading single quote, as OWASP
// advises: tenant ids may start with "-", and model names are anybody's.
// Every text cell is quoted (RFC 4180, a quote doubled), so no separator
// inside it (a comma, or the semicolon of locales that separate with one)
// starts a new cell; the figures stay bare numbers, which no spreadsheet
// mistakes for text.
func appendCSVText(dst []byte, s string) []byte {
	dst = append(dst, '"')
	if s != "" && strings.IndexByte("=+-@\t\r\x00", s[0]) >= 0 {
		dst = append(dst, '\'')
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"')
}

// usageDays is every tenant's rows from from to to (UTC days, inclusive),
// summed across instances.
func (s *Server) usageDays(ctx context.Context, from, to time.Time) ([]dayRowJSON, *apiError) {
	reg := s.tenants.Load()
	scopes := reg.IDs()
	for i, id := range scopes {
		if t, ok := reg.Get(id); ok {
			scopes[i] = t.Scope
		}
	}
	rows, err := s.usage.Days(ctx, scopes, from, to)
	if err != nil {
		recordFrom(ctx).err = err.Error()
		return nil, errUsageUnavailable
	}
	out := make([]dayRowJSON, len(rows))
	for i, row := range rows {
		c := row.ModelCounters
		out[i] = dayRowJSON{idOfScope(row.Tenant), row.Day, row.Model, modelUsageJSON{c.Requests, c.UpstreamCalls, c.InputTokens, c.OutputTokens,
			spend.Nanodollars(c.CostNanos), spend.Nanodollars(c.SavedNanos)}}
	}
	return out, nil
}
