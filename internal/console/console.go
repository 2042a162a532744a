// Package console is Corral's web console, GET /console/: server-rendered
// pages for the people who run the gateway (an overview of what the cache
// saved, the tenants and their keys, the upstreams' health, the audit
// trail), behind a sign-in with the admin token.
//
// Safety is by construction. Pages are html/template, whose contextual
// auto-escaping is the XSS defence: every tenant id, key name and model
// name reaches a page as data, never as template.HTML, so what a client
// chose is shown as text. The assets are embedded (no CDN, works
// air-gapped) and every response carries Content-Security-Policy:
// default-src 'self' with no inline script or style, X-Frame-Options:
// DENY and nosniff. Every state change is a POST whose Origin (or, absent,
// Referer) must be the console's own; the SameSite=Strict session cookie
// alone never suffices.
//
// The console keeps no logic of its own about tenants, keys or usage: it
// calls Backend, which internal/server implements with the functions its
// admin JSON handlers use.
package console

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corralhq/corral/internal/lockout"
)

//go:embed assets
var assetFS embed.FS

//go:embed templates/*.html
var templateFS embed.FS

// Prefix is where the console is mounted.
const Prefix = "/console"

// Options configure a console.
type Options struct {
	// Backend is the gateway. Required.
	Backend Backend
	// AdminToken signs visitors in and keys their session cookies.
	// Required: without it there is no console.
	AdminToken string
	// SecureCookie marks the session cookie Secure even on a plain HTTP
	// request, for a gateway behind a TLS-terminating proxy
	// (CORRAL_CONSOLE_SECURE_COOKIE); a TLS request always gets it.
	SecureCookie bool
	// Revocations holds signed-out sessions: Redis when distributed, the
	// data dir's sessions.db when embedded. Default: in memory.
	Revocations Revocations
	// Lockout throttles wrong tokens at the sign-in per client address,
	// shared with the admin API's (internal/lockout). Default: a count
	// of the console's own, in memory.
	Lockout lockout.Throttle
	// Logger receives the console's errors. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Console serves the console's pages.
type Console struct {
	b        Backend
	tokenSum [sha256.Size]byte
	secure   bool
	sess     sessions
	lockout  lockout.Throttle
	log      *slog.Logger
	now      func() time.Time
	pages    map[string]*template.Template
	handler  http.Handler
	// reads holds one token per usage read in progress, over every
	// request (usageReads); usageWait bounds one page's wait for them.
	reads     chan struct{}
	usageWait time.Duration
	days      sharedDays // the Overview's and Tenants page's read of every tenant's days
}

// New builds a console. It panics on templates that do not parse, a
// programmer's error caught by any test.
func New(o Options) (*Console, error) {
	if o.Backend == nil || o.AdminToken == "" {
		return nil, errors.New("console: Backend and AdminToken are required")
	}
	c := &Console{
		b:         o.Backend,
		tokenSum:  sha256.Sum256([]byte(o.AdminToken)),
		secure:    o.SecureCookie,
		log:       cmp.Or(o.Logger, slog.New(slog.DiscardHandler)),
		now:       o.Now,
		reads:     make(chan struct{}, usageReads),
		usageWait: usageWait,
	}
	if c.now == nil {
		c.now = time.Now
	}
	rev := o.Revocations
	if rev == nil {
		rev = NewMemoryRevocations(c.now)
	}
	c.lockout = o.Lockout
	if c.lockout == nil {
		c.lockout = lockout.NewMemory(lockout.MemoryOptions{Now: c.now})
	}
	c.sess = sessions{key: sessionKey(o.AdminToken), revoked: rev, now: c.now}
	c.pages = parsePages()
	c.handler = c.routes()
	return c, nil
}

// ServeHTTP implements http.Handler for paths under Prefix.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// Home redirects to the console, with the headers of every console
// response: the gateway's GET / when the console is on.
func (c *Console) Home() http.Handler {
	return securityHeaders(http.RedirectHandler(Prefix+"/", http.StatusFound))
}

// routes are the console's, by their full paths (Prefix included), so
// the console serves the same under any mux that hands it /console/*.
func (c *Console) routes() http.Handler {
	root := chi.NewRouter()
	root.Use(securityHeaders)
	notFound := func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "There is no such page.")
	}
	root.NotFound(notFound)
	root.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusMethodNotAllowed, "That method is not allowed here.")
	})
	root.Route(Prefix, func(r chi.Router) {
		r.NotFound(notFound)
		sub, _ := fs.Sub(assetFS, "assets")
		assets := http.StripPrefix(Prefix+"/assets/", http.FileServerFS(sub))
		r.Get("/assets/*", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-cache")
			assets.ServeHTTP(w, r)
		})
		r.Get("/login", c.handleLoginPage)
		r.With(c.sameOrigin, c.form(loginBodyLimit)).Post("/login", c.handleLogin)
		r.Group(func(r chi.Router) {
			r.Use(c.signedIn)
			r.Get("/", c.handleOverview)
			r.Get("/live", c.handleLive)
			r.Get("/tenants", c.handleTenants)
			r.Get("/tenants/{id}", c.handleTenant)
			r.Get("/upstreams", c.handleUpstreams)
			r.Get("/audit", c.handleAudit)
			r.Group(func(r chi.Router) {
				r.Use(c.sameOrigin, c.form(formBodyLimit))
				r.Post("/logout", c.handleLogout)
				r.Post("/tenants", c.handleCreateTenant)
				r.Post("/tenants/{id}/policy", c.handlePatchTenant)
				r.Post("/tenants/{id}/delete", c.handleDeleteTenant)
				r.Post("/tenants/{id}/keys", c.handleCreateKey)
				r.Post("/tenants/{id}/keys/{key_id}/revoke", c.handleRevokeKey)
				r.Post("/tenants/{id}/purge", c.handlePurge)
			})
		})
	})
	// A mux that hands the console its requests (the server's router)
	// leaves its own route context on them; the console routes afresh.
	// Prefix without its slash is redirected here: chi's Route would hand
	// it to the sub-router as "/", the Overview, where the cookie (Path
	// /console/) is never sent, so a signed-in visitor met the sign-in.
	home := c.Home()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == Prefix {
			home.ServeHTTP(w, r)
			return
		}
		root.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), chi.RouteCtxKey, nil)))
	})
}

// securityHeaders sets the headers every console response carries: the
// CSP forbids inline script and style and any other origin; the page may
// not be framed; nothing is cached (pages show live figures and, once,
// a new key).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// sameOrigin refuses a state change whose Origin (or, when the browser
// sent none, Referer) is not this console's own scheme://host: a request
// another site made the browser send, cookie and all.
func (c *Console) sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.fromHere(r) {
			c.fail(w, r, http.StatusForbidden, "Refused: this change did not come from the console's own pages (its Origin is another site's, or missing). Nothing was changed.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (c *Console) fromHere(r *http.Request) bool {
	// Behind a TLS-terminating proxy the browser says https while this
	// request is plain HTTP; SecureCookie says that is the setup, and then
	// only https is the console's own (a plain-HTTP page on the same host
	// is another origin, and one a network attacker can write). Hosts
	// compare without case, as browsers lower-case them; the port is
	// part of the host and must match too.
	scheme := "http"
	if r.TLS != nil || c.secure {
		scheme = "https"
	}
	same := func(o string) bool { return strings.EqualFold(o, scheme+"://"+r.Host) }
	if o := r.Header.Get("Origin"); o != "" {
		return same(o)
	}
	ref, err := url.Parse(r.Header.Get("Referer"))
	if err != nil || ref.Host == "" || ref.User != nil {
		return false
	}
	return same(ref.Scheme + "://" + ref.Host)
}

// The largest form bodies the console reads: the sign-in's token, and a
// change's fields (a policy is at most the admin API's 64 KiB).
const (
	loginBodyLimit = 16 << 10
	formBodyLimit  = 64<<10 + 4<<10
)

// form reads a POST's form body, at most limit bytes, before its handler
// runs: a body too large or unreadable is refused with nothing changed,
// never read as an empty form (which would, say, create an unnamed key).
func (c *Console) form(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			var err error
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
				// ParseForm leaves a multipart body unread (a later
				// PostFormValue would read it and drop its error).
				err = r.ParseMultipartForm(limit)
				if r.MultipartForm != nil {
					defer func() { _ = r.MultipartForm.RemoveAll() }()
				}
			} else {
				err = r.ParseForm()
			}
			if err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					c.fail(w, r, http.StatusRequestEntityTooLarge, "Refused: the form is too large. Nothing was changed.")
					return
				}
				c.fail(w, r, http.StatusBadRequest, "Refused: the form could not be read. Nothing was changed.")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// sessionKeyType keys the signed-in session in a request's context.
type sessionKeyType struct{}

type session struct {
	id  string
	exp time.Time
}

// signedIn lets a request with a valid session through; a page asked for
// without one redirects to the sign-in page, anything else is 401.
func (c *Console) signedIn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ck, err := r.Cookie(CookieName)
		var id string
		var exp time.Time
		if err == nil {
			id, exp, err = c.sess.check(r.Context(), ck.Value)
		}
		if err != nil && !errors.Is(err, errNoSession) && !errors.Is(err, http.ErrNoCookie) {
			c.log.Error("console: sessions unreadable", slog.String("error", err.Error()))
			c.fail(w, r, http.StatusServiceUnavailable, "Sessions cannot be checked right now (Redis unreachable); sign-in works again when it is back.")
			return
		}
		if err != nil {
			if r.Method == http.MethodGet && r.URL.Path != Prefix+"/live" {
				http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
				return
			}
			c.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Error: "Your session has ended; sign in again."})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKeyType{}, session{id, exp})))
	})
}

func (c *Console) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "login", page{Title: "Sign in"})
}

// handleLogin exchanges the admin token for a session cookie. The token
// is compared in constant time, as digests, like the admin API's bearer;
// an address locked out for guessing is refused whatever its token.
func (c *Console) handleLogin(w http.ResponseWriter, r *http.Request) {
	token := r.PostFormValue("token")
	got := sha256.Sum256([]byte(token))
	wrong := subtle.ConstantTimeCompare(got[:], c.tokenSum[:]) != 1
	if token != "" && c.lockedOut(w, r, wrong) {
		return
	}
	if wrong {
		c.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Error: "That is not the admin token (CORRAL_ADMIN_TOKEN). Try again."})
		return
	}
	value, exp := c.sess.issue()
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: value, Path: Prefix + "/", MaxAge: int(SessionTTL.Seconds()), Expires: exp,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure || r.TLS != nil,
	})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

// handleLogout revokes the session on every instance and clears the
// cookie.
func (c *Console) handleLogout(w http.ResponseWriter, r *http.Request) {
	s, _ := r.Context().Value(sessionKeyType{}).(session)
	ctx, cancel := context.WithTimeout(r.Context(), revokedWait)
	defer cancel()
	if err := c.sess.revoked.Revoke(ctx, s.id, s.exp); err != nil {
		c.log.Error("console: sign-out not recorded", slog.String("error", err.Error()))
		c.fail(w, r, http.StatusServiceUnavailable, "Sign-out could not be recorded (Redis unreachable); the session still works. Retry.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix + "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure || r.TLS != nil})
	c.render(w, r, http.StatusOK, "login", page{Title: "Sign in", Flash: "Signed out."})
}

// lockedOut counts a sign-in's token (wrong or right) against the
// visitor's TCP peer and, when that address is locked out for guessing,
// answers the sign-in page with 429 and reports true.
func (c *Console) lockedOut(w http.ResponseWriter, r *http.Request, wrong bool) bool {
	client := lockout.Client(r.RemoteAddr)
	v := c.lockout.Attempt(r.Context(), client, wrong)
	if v.Locked {
		c.log.Warn("console: address locked out after repeated wrong tokens", slog.String("client", client))
	}
	if !v.Refused {
		return false
	}
	secs := strconv.FormatInt(int64((v.RetryAfter+time.Second-1)/time.Second), 10)
	w.Header().Set("Retry-After", secs)
	c.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Sign in",
		Error: "Too many wrong tokens from your address: sign-in is refused, the right token included, for " + secs + " more seconds."})
	return true
}
