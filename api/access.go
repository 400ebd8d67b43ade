package api

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"hookrelay/access"
	"hookrelay/service"
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

// authenticate makes the request act as the principal of the API key of
// "Authorization: Bearer <key>" (the portal calls the service directly,
// not the API). The key is checked first: a valid key is
// served whatever other requests from its address did. A request without a
// valid key answers a bare 401, or a bare 429 with Retry-After once its
// client address (see Options.TrustedProxies) is past
// AuthFailuresPerMinute failures this minute; each failure is logged
// without the key or any part of it.
func (s *Server) authenticate(c *gin.Context) {
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

// authorize lets the principal reach op only within its role (the
// service's rule, applied before the request is read). Every
// refusal is the 404 the same request answers for a route or app that does
// not exist, so an app key learns nothing of what lies outside its app.
func authorize(op operation) gin.HandlerFunc {
	scoped, underApp := appScoped(op), strings.Contains(op.path, "{app}")
	return func(c *gin.Context) {
		p := principal(c)
		if underApp {
			if err := service.Authorize(p, c.Param("app")); err != nil {
				problem(c, http.StatusNotFound, err.Error())
				return
			}
		}
		if !scoped {
			if err := service.AdminOnly(p); err != nil {
				problem(c, http.StatusNotFound, err.Error())
			}
		}
	}
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
