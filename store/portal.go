package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"hookrelay/access"
	"hookrelay/ids"
)

// PortalLink is a single-use invitation into an app's portal.
type PortalLink struct {
	ID           string
	AppID        string
	Capabilities []access.Capability
	EndpointIDs  []string
	// Session is how long the session it opens lasts.
	Session   time.Duration
	ExpiresAt time.Time
	// CreatedBy is the ID of the key that made it.
	CreatedBy string
}

// PortalSession is an opened portal link, found by its cookie.
type PortalSession struct {
	ID           string
	LinkID       string
	AppID        string
	Capabilities []access.Capability
	EndpointIDs  []string
	// CSRF is the token every state-changing form of the session carries.
	CSRF      string
	ExpiresAt time.Time
}

// Principal is who a request of the session acts as.
func (p PortalSession) Principal() access.Principal {
	return access.Principal{Kind: access.KindPortal, ID: p.ID, Name: "portal session (link " + p.LinkID + ")",
		Role: access.RoleApp, AppID: p.AppID, Capabilities: p.Capabilities, EndpointIDs: p.EndpointIDs}
}

// CreatePortalLink stores l under a new ID and returns it.
func (s *Store) CreatePortalLink(ctx context.Context, l PortalLink) (PortalLink, error) {
	l.ID = ids.New(ids.PortalLink)
	if l.EndpointIDs == nil {
		l.EndpointIDs = []string{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO portal_links (id, app_id, capabilities, endpoint_ids, session_ms, expires_at, created_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, l.ID, l.AppID, l.Capabilities, l.EndpointIDs, l.Session.Milliseconds(), l.ExpiresAt, l.CreatedBy)
	if err != nil {
		return PortalLink{}, fmt.Errorf("create portal link: %w", err)
	}
	return l, nil
}

// OpenPortalLink uses link id, once and before it expires, and opens a
// session: it returns the session and the cookie value naming it (stored
// only as a hash). A link used, expired or unknown is ErrNotFound.
func (s *Store) OpenPortalLink(ctx context.Context, id string) (PortalSession, string, error) {
	token, err := randomToken()
	if err != nil {
		return PortalSession{}, "", err
	}
	csrf, err := randomToken()
	if err != nil {
		return PortalSession{}, "", err
	}
	sess := PortalSession{ID: ids.New(ids.PortalSession), LinkID: id, CSRF: csrf}
	err = s.pool.QueryRow(ctx, `
		WITH l AS (
		  UPDATE portal_links SET used_at = now() WHERE id = $1 AND used_at IS NULL AND expires_at > now()
		  RETURNING id, app_id, capabilities, endpoint_ids, session_ms
		)
		INSERT INTO portal_sessions (id, token_hash, link_id, app_id, capabilities, endpoint_ids, csrf, expires_at)
		SELECT $2, $3, l.id, l.app_id, l.capabilities, l.endpoint_ids, $4, now() + l.session_ms * interval '1 millisecond' FROM l
		RETURNING app_id, capabilities, endpoint_ids, expires_at`, id, sess.ID, HashKey(token), csrf).
		Scan(&sess.AppID, &sess.Capabilities, &sess.EndpointIDs, &sess.ExpiresAt)
	if err != nil {
		return PortalSession{}, "", notFound(err, "portal link "+id+" (unknown, used or expired)")
	}
	return sess, token, nil
}

// PortalSessionByToken returns the unexpired session token (a cookie's
// value) names.
func (s *Store) PortalSessionByToken(ctx context.Context, token string) (PortalSession, error) {
	var sess PortalSession
	err := s.pool.QueryRow(ctx, `SELECT id, link_id, app_id, capabilities, endpoint_ids, csrf, expires_at FROM portal_sessions
		WHERE token_hash = $1 AND expires_at > now()`, HashKey(token)).
		Scan(&sess.ID, &sess.LinkID, &sess.AppID, &sess.Capabilities, &sess.EndpointIDs, &sess.CSRF, &sess.ExpiresAt)
	if err != nil {
		return PortalSession{}, notFound(err, "portal session")
	}
	return sess, nil
}

// EndPortalSession ends the session token names (sign out).
func (s *Store) EndPortalSession(ctx context.Context, token string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM portal_sessions WHERE token_hash = $1`, HashKey(token)); err != nil {
		return fmt.Errorf("end portal session: %w", err)
	}
	return nil
}

// prunePortal deletes expired sessions, links past their expiry, and
// audit entries older than before.
func (s *Store) prunePortal(ctx context.Context, before time.Time) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM portal_sessions WHERE expires_at < now()`); err != nil {
		return fmt.Errorf("prune portal sessions: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM audit_log WHERE at < $1`, before); err != nil {
		return fmt.Errorf("prune audit log: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM portal_links l WHERE expires_at < now()
		AND NOT EXISTS (SELECT 1 FROM portal_sessions s WHERE s.link_id = l.id)`); err != nil {
		return fmt.Errorf("prune portal links: %w", err)
	}
	return nil
}

func randomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
