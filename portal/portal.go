// Package portal serves the subscriber portal under /portal/: the console a
// provider hands its customer through a single-use link, server-rendered
// from templates embedded in the binary. Every read and change is a call of
// the service layer (package service) as the session's app-scoped
// principal, so the portal validates, scopes (capabilities, endpoint
// limits) and audits exactly as the REST API does; the portal adds what a
// browser needs: the session cookie, CSRF tokens, capabilities,
// endpoint limits and escaping of everything a stranger's server returned.
package portal

import (
	"bytes"
	"cmp"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/access"
	"hookrelay/service"
	"hookrelay/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// CookieName is the session cookie's name.
const CookieName = "hookrelay_portal"

// Prefix is where the portal is served.
const Prefix = "/portal/"

// Options configures the portal.
type Options struct {
	// Service serves every read and change, as the session's principal.
	Service *service.Service
	// Store holds links and sessions.
	Store *store.Store
	// LinkSigner checks portal link tokens; the API's signs them.
	LinkSigner access.Signer
	// InsecureCookies drops Secure (and with it SameSite=None and
	// Partitioned) from the session cookie, for dev mode over plain http:
	// the cookie is then SameSite=Lax, which a link from another site still
	// carries but a frame on another site does not. Defaults to false:
	// Secure; SameSite=None; Partitioned, which works for links and for
	// frames of another site.
	InsecureCookies bool
	// FrameAncestors are the origins allowed to frame the portal (CSP
	// frame-ancestors), e.g. "https://dashboard.example.com". Defaults to
	// 'self' only.
	FrameAncestors []string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Portal is the portal's handler.
type Portal struct {
	opts   Options
	logger *slog.Logger
	pages  map[string]*template.Template
	csp    string
}

// New returns the portal.
func New(opts Options) (*Portal, error) {
	p := &Portal{opts: opts, logger: cmp.Or(opts.Logger, slog.Default()), pages: map[string]*template.Template{}}
	names, err := templateFS.ReadDir("templates")
	if err != nil {
		return nil, fmt.Errorf("portal templates: %w", err)
	}
	for _, n := range names {
		if n.Name() == "layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+n.Name())
		if err != nil {
			return nil, fmt.Errorf("portal template %s: %w", n.Name(), err)
		}
		p.pages[strings.TrimSuffix(n.Name(), ".html")] = t
	}
	ancestors := "'self'"
	if len(opts.FrameAncestors) > 0 {
		ancestors = strings.Join(opts.FrameAncestors, " ")
	}
	// No inline script or style at all: what a stranger's server returned
	// cannot run even if it escaped the templates.
	p.csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
		"form-action 'self'; base-uri 'none'; frame-ancestors " + ancestors
	return p, nil
}

// Handler serves /portal/.
func (p *Portal) Handler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	_ = r.SetTrustedProxies(nil)
	r.Use(gin.CustomRecovery(func(c *gin.Context, err any) {
		p.logger.Error("portal panic", "route", c.FullPath(), "err", err)
		p.plain(c, http.StatusInternalServerError, "Something went wrong. Try again.")
	}))
	r.Use(p.headers)
	r.NoRoute(func(c *gin.Context) { p.plain(c, http.StatusNotFound, msgNoSuchPage) })
	r.GET("/portal/static/*file", p.static)
	r.GET("/portal/open", p.open)
	g := r.Group("/portal", p.session)
	g.GET("/", func(c *gin.Context) { c.Redirect(http.StatusSeeOther, "/portal/deliveries") })
	g.GET("/deliveries", p.deliveries)
	g.GET("/deliveries/:dlv", p.delivery)
	g.GET("/events", p.findEvent)
	g.GET("/events/:evt", p.event)
	g.GET("/endpoints", p.endpoints)
	g.GET("/endpoints/new", p.need(access.CapManageEndpoints), p.allEndpoints, p.newEndpoint)
	g.GET("/endpoints/:ep", p.endpoint)
	g.GET("/endpoints/:ep/replay", p.need(access.CapResend), p.rangeReplay(true))
	g.GET("/event-types", p.eventTypes)
	g.GET("/stats", p.stats)
	// Every change: a CSRF token, then the capability it needs.
	post := g.Group("", p.csrf)
	post.POST("/deliveries/:dlv/resend", p.need(access.CapResend), p.deliveryAction(p.opts.Service.ReplayDelivery, "resent"))
	// Release lets a blocking dead letter's sequence go on.
	post.POST("/deliveries/:dlv/release", p.need(access.CapResend), p.deliveryAction(p.opts.Service.ReleaseDelivery, "released"))
	post.POST("/endpoints", p.need(access.CapManageEndpoints), p.allEndpoints, p.createEndpoint)
	post.POST("/endpoints/:ep", p.need(access.CapManageEndpoints), p.updateEndpoint)
	// A filter preview saves nothing but needs what a save needs.
	post.POST("/endpoints/filter-test", p.need(access.CapManageEndpoints), p.allEndpoints, p.previewFilter)
	post.POST("/endpoints/:ep/filter-test", p.need(access.CapManageEndpoints), p.previewFilter)
	post.POST("/endpoints/:ep/disable", p.need(access.CapManageEndpoints),
		p.endpointAction(disabled(true), "/portal/endpoints/{ep}", "disabled"))
	post.POST("/endpoints/:ep/enable", p.need(access.CapManageEndpoints),
		p.endpointAction(disabled(false), "/portal/endpoints/{ep}", "enabled"))
	post.POST("/endpoints/:ep/delete", p.need(access.CapManageEndpoints),
		p.endpointAction(deleteEndpoint, "/portal/endpoints", "deleted"))
	post.POST("/endpoints/:ep/test", p.need(access.CapManageEndpoints),
		p.endpointAction(sendTest, "/portal/endpoints/{ep}", "tested"))
	post.POST("/endpoints/:ep/rotate", p.need(access.CapRotateSecret), p.rotate)
	post.POST("/endpoints/:ep/replay", p.need(access.CapResend), p.rangeReplay(false))
	post.POST("/logout", p.logout)
	return r
}

// headers sets what every portal answer carries.
func (p *Portal) headers(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", p.csp)
	h.Set("X-Content-Type-Options", "nosniff")
	// The link's token must not leak through Referer, nor pages through a cache.
	h.Set("Referrer-Policy", "no-referrer")
	if !strings.HasPrefix(c.Request.URL.Path, "/portal/static/") {
		h.Set("Cache-Control", "no-store")
	}
}

func (p *Portal) static(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=300")
	c.FileFromFS("static"+c.Param("file"), http.FS(staticFS))
}

// open exchanges a link's token for a session cookie, once, and redirects
// to the delivery log. Every refusal is the same plain page.
func (p *Portal) open(c *gin.Context) {
	refuse := func(why string, err error) {
		p.logger.Info("portal link refused", "why", why, "err", err)
		p.plain(c, http.StatusForbidden, "This portal link is invalid, has expired or was already used. Ask for a new one.")
	}
	id, err := p.opts.LinkSigner.Verify(c.Query("token"), time.Now())
	if err != nil {
		var te *access.TokenError
		if errors.As(err, &te) {
			refuse(te.Reason, nil)
			return
		}
		refuse("token", err)
		return
	}
	sess, token, err := p.opts.Store.OpenPortalLink(c.Request.Context(), id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			refuse("used or expired", nil)
			return
		}
		p.logger.Error("open portal link", "err", err)
		p.plain(c, http.StatusServiceUnavailable, "The portal is unavailable right now. Try the link again shortly.")
		return
	}
	p.setCookie(c, token, time.Until(sess.ExpiresAt))
	c.Redirect(http.StatusSeeOther, "/portal/deliveries")
}

// setCookie sets (or, with maxAge < 0, clears) the session cookie.
func (p *Portal) setCookie(c *gin.Context, value string, maxAge time.Duration) {
	ck := &http.Cookie{Name: CookieName, Value: value, Path: Prefix, HttpOnly: true, MaxAge: int(maxAge.Seconds())}
	if maxAge < 0 {
		ck.MaxAge = -1
	}
	if p.opts.InsecureCookies {
		ck.SameSite = http.SameSiteLaxMode
	} else {
		ck.Secure, ck.SameSite, ck.Partitioned = true, http.SameSiteNoneMode, true
	}
	http.SetCookie(c.Writer, ck)
}

// ctxSession is where session keeps the request's session.
const ctxSession = "portal_session"

// session requires the session cookie of an unexpired session.
func (p *Portal) session(c *gin.Context) {
	ck, err := c.Cookie(CookieName)
	if err != nil || ck == "" {
		p.plain(c, http.StatusUnauthorized, "Your portal session is missing or has expired. Open a new portal link.")
		return
	}
	sess, err := p.opts.Store.PortalSessionByToken(c.Request.Context(), ck)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			p.plain(c, http.StatusUnauthorized, "Your portal session is missing or has expired. Open a new portal link.")
			return
		}
		p.logger.Error("portal session", "err", err)
		p.plain(c, http.StatusServiceUnavailable, "The portal is unavailable right now. Try again shortly.")
		return
	}
	c.Set(ctxSession, sess)
}

func sessionOf(c *gin.Context) store.PortalSession {
	s, _ := c.MustGet(ctxSession).(store.PortalSession)
	return s
}

// csrf refuses a change whose form does not carry the session's token.
func (p *Portal) csrf(c *gin.Context) {
	got := c.PostForm("csrf")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(sessionOf(c).CSRF)) != 1 {
		p.plain(c, http.StatusForbidden, "This form has expired. Go back, reload the page and try again.")
	}
}

// Plain answers shown in several places.
const (
	msgNoSuchPage = "There is no such page."
	msgNotAllowed = "This portal link does not allow that."
)

// allEndpoints refuses a session limited to some endpoints: what it would
// create would lie outside its own limit.
func (p *Portal) allEndpoints(c *gin.Context) {
	if sessionOf(c).Principal().Limited() {
		p.plain(c, http.StatusForbidden, msgNotAllowed)
	}
}

// need refuses a session without capability cp.
func (p *Portal) need(cp access.Capability) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !sessionOf(c).Principal().Can(cp) {
			p.plain(c, http.StatusForbidden, msgNotAllowed)
		}
	}
}

func (p *Portal) logout(c *gin.Context) {
	if ck, err := c.Cookie(CookieName); err == nil {
		if err := p.opts.Store.EndPortalSession(c.Request.Context(), ck); err != nil {
			p.logger.Error("end portal session", "err", err)
		}
	}
	p.setCookie(c, "", -1)
	p.plain(c, http.StatusOK, "You are signed out of the portal.")
}

// plain answers a bare page with msg and nothing else, and stops.
func (p *Portal) plain(c *gin.Context, status int, msg string) {
	p.render(c, status, "plain", map[string]any{"Message": msg})
	c.Abort()
}

// render executes page with data into the answer.
func (p *Portal) render(c *gin.Context, status int, page string, data map[string]any) {
	t, ok := p.pages[page]
	if !ok {
		panic("portal: no page " + page)
	}
	if v, ok := c.Get(ctxSession); ok {
		sess := v.(store.PortalSession)
		data["Session"] = sess
		data["Can"] = capabilities(sess.Principal())
	}
	data["Page"] = page
	var buf bytes.Buffer
	if err := t.Execute(&buf, data); err != nil {
		p.logger.Error("portal render", "page", page, "err", err)
		c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("internal error"))
		c.Abort()
		return
	}
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

// capabilities maps each capability to whether p has it, for templates.
func capabilities(p access.Principal) map[string]bool {
	m := map[string]bool{}
	for _, cp := range access.Capabilities() {
		m[string(cp)] = p.Can(cp)
	}
	return m
}
