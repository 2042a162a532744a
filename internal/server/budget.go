package server

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/tenant"
)

// budgetHeader is on every answer to a tenant with a budget: the smallest
// remaining over its periods, in USD, before this request's cost.
const budgetHeader = "X-Corral-Budget-Remaining-Usd"

// Budget refusals (statuses decided in errors.go's writeError for the
// Messages API).
func errModelNotPriced(model string) *apiError {
	e := clientError(http.StatusForbidden, "model_not_priced", "The model "+jsonQuote(model)+" has no price in this gateway's price catalog, and this key has a budget: only priced models may be called.").withParam("model")
	e.noRetry = true
	return e
}

var errBudgetUnmetered = func() *apiError {
	e := clientError(http.StatusForbidden, "budget_unmetered_endpoint", "This key has a budget, and Corral cannot price this endpoint's calls; the tenant's unmetered_endpoints: allow permits them.")
	e.noRetry = true
	return e
}()

// errBudgetExhausted refuses a call once spent plus reserved has reached a
// budget: 429 insufficient_quota as OpenAI words a spent account, with no
// Retry-After and x-should-retry: false, so the SDKs do not retry (waiting
// cannot help before the reset). On /v1/messages* it is a 400
// invalid_request_error (writeError).
func errBudgetExhausted(e *spend.ExhaustedError) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "insufficient_quota",
		Message: e.Error(), neverFits: true, noRetry: true, budget: true}
}

// checkBudget applies a budgeted tenant's rules to a model call before
// anything is served or forwarded: only priced models, and the remaining
// budget on the answer (this instance's view: no Redis call, so a hit
// pays nothing for it).
func (s *Server) checkBudget(w http.ResponseWriter, t *tenant.Tenant, model string) *apiError {
	if !t.Budget.Set() {
		return nil
	}
	if _, ok := s.prices.Load().Lookup(model); !ok {
		return errModelNotPriced(model)
	}
	s.setBudgetHeader(w.Header(), s.budgets.Standing(t.Scope, t.Budget), t.ID)
	return nil
}

func (s *Server) setBudgetHeader(h http.Header, st spend.Standing, tenantID string) {
	left, ok := st.Remaining()
	if !ok {
		return
	}
	h.Set(budgetHeader, left.USD())
	for _, p := range st {
		s.metrics.BudgetRemaining(tenantID, p.Name, int64(p.Remaining()))
	}
}

// checkUnmetered refuses a budgeted tenant's proxied POST that can cost
// money Corral cannot price (images, audio, batches, fine-tuning), unless
// the tenant allows them; counting tokens is free and passes.
func (s *Server) checkUnmetered(w http.ResponseWriter, r *http.Request, t *tenant.Tenant, rel string) *apiError {
	if t == nil || !t.Budget.Set() || r.Method != http.MethodPost || strings.HasSuffix(rel, "/count_tokens") {
		return nil
	}
	if !t.AllowUnmetered {
		return errBudgetUnmetered
	}
	s.setBudgetHeader(w.Header(), s.budgets.Standing(t.Scope, t.Budget), t.ID)
	return nil
}

// estimateCost prices a call's tokens/min estimate for its reservation,
// at the model's output price (the dearer kind of token), so a reservation
// seldom falls short of the call's cost.
func (s *Server) estimateCost(model string, tokens int) spend.Nanodollars {
	p, ok := s.prices.Load().Lookup(model)
	if !ok {
		return 0
	}
	return p.Cost(spend.Usage{Output: tokens})
}

// flightCharge is a leader's charges before its upstream call: the
// tokens/min estimate (when the tenant has the limit) and the budget
// reservation (when it has a budget), settled in observer.Called.
type flightCharge struct {
	s        *Server
	t        *tenant.Tenant
	tokens   *tenantTokens // nil without tokens/min
	estimate spend.Nanodollars

	res      spend.Reservation
	reserved bool
}

// Take implements coalesce.Tokens: tokens/min first, then one budget
// decision (one Redis round trip).
func (fc *flightCharge) Take(ctx context.Context) error {
	if fc.tokens != nil {
		if err := fc.tokens.Take(ctx); err != nil {
			return err
		}
	}
	if !fc.t.Budget.Set() {
		return nil
	}
	res, _, err := fc.s.budgets.Reserve(ctx, fc.t.Scope, fc.t.Budget, fc.estimate)
	var ee *spend.ExhaustedError
	if errors.As(err, &ee) {
		return errBudgetExhausted(ee)
	}
	fc.res, fc.reserved = res, true
	return nil
}

// Charge implements coalesce.Tokens.
func (fc *flightCharge) Charge(ctx context.Context, actual int) {
	if fc.tokens != nil {
		fc.tokens.Charge(ctx, actual)
	}
}

// Release gives back a reservation whose call never happened (the
// tenant's leader permit did not come).
func (fc *flightCharge) Release(ctx context.Context) {
	if fc.reserved {
		fc.reserved = false
		fc.s.budgets.Settle(context.WithoutCancel(ctx), fc.res, 0)
	}
}

// settleBudget replaces a flight's reservation with its call's cost; a
// call nobody reserved for (a background refresh) is charged all the same,
// to the tenant of that Scope.
func (s *Server) settleBudget(ctx context.Context, scope string, charge any, cost spend.Nanodollars) {
	if fc, ok := charge.(*flightCharge); ok {
		if fc.reserved {
			fc.reserved = false
			s.budgets.Settle(ctx, fc.res, cost)
		}
		return
	}
	t, ok := s.tenants.Load().Get(tenant.IDOfScope(scope))
	if ok && t.Scope == scope && t.Budget.Set() && cost > 0 {
		s.budgets.Settle(ctx, spend.Reservation{Tenant: scope}, cost)
	}
}
