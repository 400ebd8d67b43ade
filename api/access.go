package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/access"
	"hookrelay/store"
)

// keyCacheSize bounds the cache; past it the cache starts over.
const keyCacheSize = 1024

// keyCacheTTL is how long a verified API key is trusted without a lookup.
// A revocation empties this process's cache at once and every other
// process's within RevocationPollInterval.
const keyCacheTTL = 5 * time.Second

// RevocationPollInterval is how often an API process asks Postgres whether
// a key was revoked elsewhere, to drop its cache of verified keys.
const RevocationPollInterval = time.Second

// keyCache remembers verified keys by their SHA-256 hash (never the key).
type keyCache struct {
	mu sync.Mutex
	m  map[string]cachedKey
}

type cachedKey struct {
	p       access.Principal
	expires time.Time
}

func (k *keyCache) get(hash string, now time.Time) (access.Principal, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[hash]
	if !ok || now.After(e.expires) {
		return access.Principal{}, false
	}
	return e.p, true
}

func (k *keyCache) put(hash string, p access.Principal, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) > keyCacheSize {
		k.m = map[string]cachedKey{}
	}
	k.m[hash] = cachedKey{p: p, expires: now.Add(keyCacheTTL)}
}

func (k *keyCache) flush() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m = nil
}

// WatchRevocations drops the cache of verified keys whenever a key was
// revoked (by any process), until ctx ends.
func (s *Server) WatchRevocations(ctx context.Context) {
	var last time.Time
	t := time.NewTicker(RevocationPollInterval)
	defer t.Stop()
	for {
		if at, err := s.store.LastRevocation(ctx); err == nil && !at.Equal(last) {
			last = at
			s.keys.flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// principal is who the request acts as (set by authenticate).
func principal(c *gin.Context) access.Principal {
	p, _ := access.FromContext(c.Request.Context())
	return p
}

// authenticate makes the request act as a principal: the portal's session
// (set in-process, never from the network), else the API key of
// "Authorization: Bearer <key>". The key is checked first: a valid key is
// served whatever other requests from its address did. A request without a
// valid key answers a bare 401, or a bare 429 with Retry-After once its
// client address (see Options.TrustedProxies) is past
// AuthFailuresPerMinute failures this minute; each failure is logged
// without the key or any part of it.
func (s *Server) authenticate(c *gin.Context) {
	if _, ok := access.FromContext(c.Request.Context()); ok {
		return
	}
	now := time.Now()
	key, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
	if !ok {
		key = ""
	}
	p, why, err := s.verify(c.Request.Context(), key, now)
	if err != nil {
		s.fail(c, err)
		return
	}
	if why == "" {
		c.Request = c.Request.WithContext(access.NewContext(c.Request.Context(), p))
		return
	}
	client := s.proxies.clientAddr(c.Request)
	if until, over := s.authFailures.blocked(client, now); over {
		c.Header("Retry-After", retryAfter(until, now))
		problem(c, http.StatusTooManyRequests, "")
		return
	}
	s.authFailures.fail(client, now)
	s.logger.Warn("authentication failed", "client", client, "route", c.FullPath(), "why", why)
	problem(c, http.StatusUnauthorized, "")
}

// verify finds the principal of an API key: why says why there is none
// ("" when there is), err that the database could not answer.
func (s *Server) verify(ctx context.Context, key string, now time.Time) (p access.Principal, why string, err error) {
	if key == "" {
		return p, "no bearer key", nil
	}
	hash := string(store.HashKey(key))
	if p, ok := s.keys.get(hash, now); ok {
		return p, "", nil
	}
	k, err := s.store.Authenticate(ctx, key)
	switch {
	case store.IsUnavailable(err):
		return p, "", err
	case err != nil:
		return p, "unknown or revoked key", nil
	}
	p = k.Principal()
	s.keys.put(hash, p, now)
	return p, "", nil
}

// appScoped reports whether an app-bound principal may reach op: the routes
// under its app, but not deleting the app itself.
func appScoped(op operation) bool {
	return strings.HasPrefix(op.path, "/v1/apps/{app}") && !(op.method == http.MethodDelete && op.path == "/v1/apps/{app}")
}

// authorize lets the principal reach op only within its role. Every
// refusal is the 404 the same request answers for a route or app that does
// not exist, so an app key learns nothing of what lies outside its app.
func authorize(op operation) gin.HandlerFunc {
	scoped, underApp := appScoped(op), strings.Contains(op.path, "{app}")
	return func(c *gin.Context) {
		p := principal(c)
		switch {
		case p.Role == access.RoleAdmin:
		case underApp && !p.ReachesApp(c.Param("app")):
			problem(c, http.StatusNotFound, fmt.Errorf("app %s: %w", c.Param("app"), store.ErrNotFound).Error())
		case !scoped:
			problem(c, http.StatusNotFound, "no such route")
		}
	}
}

// audited says whether op's successful calls are written to the audit
// log: every state-changing call but event ingest, which records nothing
// beyond the event itself (it is the data path, not the control path), and
// the filter tests, POSTs that change nothing.
func audited(op operation) bool {
	switch op.path {
	case "/v1/apps/{app}/events", "/v1/apps/{app}/filter-test", "/v1/apps/{app}/endpoints/{ep}/filter-test":
		return false
	}
	return op.method != http.MethodGet
}

// audit records a successful state-changing call with who made it.
func (s *Server) audit(c *gin.Context) {
	c.Next()
	if st := c.Writer.Status(); st >= 400 {
		return
	}
	p := principal(c)
	// The call succeeded: its record must not depend on the client staying.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request.Context()), 5*time.Second)
	defer cancel()
	err := s.store.Audit(ctx, store.AuditEntry{AppID: c.Param("app"), ActorKind: p.Kind, ActorID: p.ID, ActorName: p.Name,
		Method: c.Request.Method, Route: c.FullPath(), Path: c.Request.URL.Path, Status: c.Writer.Status()})
	if err != nil {
		s.logger.Error("audit log write failed", "route", c.FullPath(), "actor", p.ID, "err", err)
	}
}

type keyRequest struct {
	Name  *string `json:"name"`
	Role  *string `json:"role"`
	AppID *string `json:"app_id"`
}

// keyView is a key as the API shows it; Key only in the answer that made it.
type keyView struct {
	store.APIKey
	Key string `json:"key,omitempty"`
}

func (s *Server) createKey(c *gin.Context) {
	var req keyRequest
	if !bind(c, &req) {
		return
	}
	if req.Name == nil || strings.TrimSpace(*req.Name) == "" || len(*req.Name) > access.MaxKeyNameLength {
		problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("name is required, at most %d characters", access.MaxKeyNameLength), "name")
		return
	}
	role := access.RoleAdmin
	if req.Role != nil {
		role = access.Role(*req.Role)
	}
	switch {
	case role != access.RoleAdmin && role != access.RoleApp:
		problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("role must be one of %v", access.Roles()), "role")
		return
	case role == access.RoleApp && (req.AppID == nil || *req.AppID == ""):
		problem(c, http.StatusUnprocessableEntity, "app_id is required for an app key", "app_id")
		return
	case role == access.RoleAdmin && req.AppID != nil:
		problem(c, http.StatusUnprocessableEntity, "app_id is only for an app key", "app_id")
		return
	}
	appID := ""
	if req.AppID != nil {
		appID = *req.AppID
	}
	k, secret, err := s.store.CreateKey(c.Request.Context(), *req.Name, role, appID)
	if errors.Is(err, store.ErrNotFound) {
		problem(c, http.StatusUnprocessableEntity, err.Error(), "app_id")
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, keyView{APIKey: k, Key: secret})
}

func (s *Server) listKeys(c *gin.Context) {
	p, ok := page(c)
	if !ok {
		return
	}
	keys, err := s.store.ListKeys(c.Request.Context(), p)
	if err != nil {
		s.fail(c, err)
		return
	}
	list(c, p, keys, func(k store.APIKey) string { return k.ID })
}

func (s *Server) revokeKey(c *gin.Context) {
	if err := s.store.RevokeKey(c.Request.Context(), c.Param("key")); err != nil {
		s.fail(c, err)
		return
	}
	// This process trusts no key it verified before the revocation; the
	// others follow within RevocationPollInterval.
	s.keys.flush()
	c.Status(http.StatusNoContent)
}

type portalLinkRequest struct {
	Capabilities []string `json:"capabilities"`
	TTL          *string  `json:"ttl"`
	EndpointIDs  []string `json:"endpoint_ids"`
}

func (s *Server) createPortalLink(c *gin.Context) {
	var req portalLinkRequest
	if !bind(c, &req) {
		return
	}
	caps, err := access.ParseCapabilities(req.Capabilities)
	if err != nil {
		problem(c, http.StatusUnprocessableEntity, "capabilities: "+err.Error(), "capabilities")
		return
	}
	ttl := access.LinkTTLDefault
	if req.TTL != nil {
		d, err := time.ParseDuration(*req.TTL)
		if err != nil || d < access.MinLinkTTL || d > access.MaxLinkTTL {
			problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("ttl must be a Go duration from %s to %s", access.MinLinkTTL, access.MaxLinkTTL), "ttl")
			return
		}
		ttl = d
	}
	if len(req.EndpointIDs) > access.MaxLinkEndpoints {
		problem(c, http.StatusUnprocessableEntity, fmt.Sprintf("endpoint_ids: at most %d", access.MaxLinkEndpoints), "endpoint_ids")
		return
	}
	ctx := c.Request.Context()
	if _, err := s.store.GetApp(ctx, c.Param("app")); err != nil {
		s.fail(c, err)
		return
	}
	for _, id := range req.EndpointIDs {
		if _, err := s.store.GetEndpoint(ctx, c.Param("app"), id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				problem(c, http.StatusUnprocessableEntity, "endpoint_ids: "+err.Error(), "endpoint_ids")
				return
			}
			s.fail(c, err)
			return
		}
	}
	now := time.Now()
	l, err := s.store.CreatePortalLink(ctx, store.PortalLink{AppID: c.Param("app"), Capabilities: caps, EndpointIDs: req.EndpointIDs,
		Session: ttl, ExpiresAt: now.Add(ttl), CreatedBy: principal(c).ID})
	if err != nil {
		s.fail(c, err)
		return
	}
	token := s.links.Sign(l.ID, l.ExpiresAt)
	c.JSON(http.StatusCreated, gin.H{"id": l.ID, "url": s.publicURL(c) + "/portal/open?token=" + url.QueryEscape(token),
		"capabilities": caps, "endpoint_ids": l.EndpointIDs, "expires_at": l.ExpiresAt.UTC()})
}

// publicURL is where users reach this API: Options.PublicURL, else the
// request's own scheme and host.
func (s *Server) publicURL(c *gin.Context) string {
	if s.publicBase != "" {
		return strings.TrimRight(s.publicBase, "/")
	}
	scheme := "http"
	if c.Request.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}

func (s *Server) listAudit(c *gin.Context) {
	p, ok := s.appPage(c)
	if !ok {
		return
	}
	entries, err := s.store.ListAudit(c.Request.Context(), c.Param("app"), p)
	if err != nil {
		s.fail(c, err)
		return
	}
	list(c, p, entries, func(e store.AuditEntry) string { return fmt.Sprint(e.ID) })
}

// listAppEventTypes is the catalog as an app's keys and portal see it:
// without the operational types, unless it is the operations app.
func (s *Server) listAppEventTypes(c *gin.Context) {
	p, ok := s.appPage(c)
	if !ok {
		return
	}
	ets, err := s.store.ListAppEventTypes(c.Request.Context(), c.Param("app"), p)
	if err != nil {
		s.fail(c, err)
		return
	}
	list(c, p, ets, func(e store.EventType) string { return e.Name })
}
