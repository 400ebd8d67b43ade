package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"hookrelay/access"
	"hookrelay/store"
)

// KeyInput asks for an API key.
type KeyInput struct {
	Name *string `json:"name"`
	// Role defaults to access.RoleAdmin.
	Role *string `json:"role"`
	// AppID is required for, and only for, an app key.
	AppID *string `json:"app_id"`
}

// Key is an API key as callers see it; Key only in the result that made
// it.
type Key struct {
	store.APIKey
	Key string `json:"key,omitempty"`
}

// PortalLinkInput asks for a portal link.
type PortalLinkInput struct {
	Capabilities []string `json:"capabilities"`
	// TTL is a Go duration from access.MinLinkTTL to access.MaxLinkTTL;
	// nil is access.LinkTTLDefault.
	TTL         *string  `json:"ttl"`
	EndpointIDs []string `json:"endpoint_ids"`
}

// PortalLink is a made link: Token opens it (GET /portal/open?token=).
type PortalLink struct {
	ID           string
	Token        string
	Capabilities []access.Capability
	EndpointIDs  []string
	ExpiresAt    time.Time
}

// Audited key and link calls.
var (
	actCreateKey  = action{"POST", "/v1/api-keys", 201}
	actRevokeKey  = action{"DELETE", "/v1/api-keys/:key", 204}
	actPortalLink = action{"POST", "/v1/apps/:app/portal-links", 201}
)

// CreateKey makes an API key (admin only); the result carries the key,
// shown this once.
func (s *Service) CreateKey(ctx context.Context, p principal, in KeyInput) (Key, error) {
	if err := AdminOnly(p); err != nil {
		return Key{}, err
	}
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" || len(*in.Name) > access.MaxKeyNameLength {
		return Key{}, invalidf("name", "name is required, at most %d characters", access.MaxKeyNameLength)
	}
	role := access.RoleAdmin
	if in.Role != nil {
		role = access.Role(*in.Role)
	}
	switch {
	case role != access.RoleAdmin && role != access.RoleApp:
		return Key{}, invalidf("role", "role must be one of %v", access.Roles())
	case role == access.RoleApp && (in.AppID == nil || *in.AppID == ""):
		return Key{}, invalidf("app_id", "app_id is required for an app key")
	case role == access.RoleAdmin && in.AppID != nil:
		return Key{}, invalidf("app_id", "app_id is only for an app key")
	}
	k, secret, err := s.store.CreateKey(ctx, *in.Name, role, deref(in.AppID))
	if errors.Is(err, store.ErrNotFound) {
		return Key{}, &InvalidError{Field: "app_id", Detail: err.Error()}
	}
	if err != nil {
		return Key{}, typed(err)
	}
	s.record(ctx, p, "", actCreateKey, "/v1/api-keys")
	return Key{APIKey: k, Key: secret}, nil
}

// ListKeys lists a page of API keys (admin only).
func (s *Service) ListKeys(ctx context.Context, p principal, pg Page) (List[store.APIKey], error) {
	if err := AdminOnly(p); err != nil {
		return List[store.APIKey]{}, err
	}
	sp, err := pg.store()
	if err != nil {
		return List[store.APIKey]{}, err
	}
	keys, err := s.store.ListKeys(ctx, sp)
	if err != nil {
		return List[store.APIKey]{}, typed(err)
	}
	return listOf(sp, keys, func(k store.APIKey) string { return k.ID }), nil
}

// RevokeKey revokes API key id (admin only). Processes that cache
// verified keys must drop their cache.
func (s *Service) RevokeKey(ctx context.Context, p principal, id string) error {
	if err := AdminOnly(p); err != nil {
		return err
	}
	if err := s.store.RevokeKey(ctx, id); err != nil {
		return typed(err)
	}
	s.record(ctx, p, "", actRevokeKey, "/v1/api-keys/"+id)
	return nil
}

// CreatePortalLink makes a single-use, expiring link into app appID's
// portal, with the capabilities in gives, limited to its endpoints when
// it names some.
func (s *Service) CreatePortalLink(ctx context.Context, p principal, appID string, in PortalLinkInput) (PortalLink, error) {
	if err := keyCall(p, appID); err != nil {
		return PortalLink{}, err
	}
	caps, err := access.ParseCapabilities(in.Capabilities)
	if err != nil {
		return PortalLink{}, invalidf("capabilities", "capabilities: %s", err)
	}
	ttl := access.LinkTTLDefault
	if in.TTL != nil {
		d, err := time.ParseDuration(*in.TTL)
		if err != nil || d < access.MinLinkTTL || d > access.MaxLinkTTL {
			return PortalLink{}, invalidf("ttl", "ttl must be a Go duration from %s to %s", access.MinLinkTTL, access.MaxLinkTTL)
		}
		ttl = d
	}
	if len(in.EndpointIDs) > access.MaxLinkEndpoints {
		return PortalLink{}, invalidf("endpoint_ids", "endpoint_ids: at most %d", access.MaxLinkEndpoints)
	}
	if _, err := s.store.GetApp(ctx, appID); err != nil {
		return PortalLink{}, typed(err)
	}
	for _, id := range in.EndpointIDs {
		if _, err := s.store.GetEndpoint(ctx, appID, id); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return PortalLink{}, invalidf("endpoint_ids", "endpoint_ids: %s", err)
			}
			return PortalLink{}, typed(err)
		}
	}
	now := time.Now()
	l, err := s.store.CreatePortalLink(ctx, store.PortalLink{AppID: appID, Capabilities: caps, EndpointIDs: in.EndpointIDs,
		Session: ttl, ExpiresAt: now.Add(ttl), CreatedBy: p.ID})
	if err != nil {
		return PortalLink{}, typed(err)
	}
	s.record(ctx, p, appID, actPortalLink, "/v1/apps/"+appID+"/portal-links")
	return PortalLink{ID: l.ID, Token: s.links.Sign(l.ID, l.ExpiresAt), Capabilities: caps, EndpointIDs: l.EndpointIDs, ExpiresAt: l.ExpiresAt.UTC()}, nil
}

// ListAudit lists a page of app appID's audit log: every state-changing
// call on it and who made it.
func (s *Service) ListAudit(ctx context.Context, p principal, appID string, pg Page) (List[store.AuditEntry], error) {
	if err := keyCall(p, appID); err != nil {
		return List[store.AuditEntry]{}, err
	}
	sp, err := s.appPage(ctx, p, appID, pg)
	if err != nil {
		return List[store.AuditEntry]{}, err
	}
	entries, err := s.store.ListAudit(ctx, appID, sp)
	if err != nil {
		return List[store.AuditEntry]{}, typed(err)
	}
	return listOf(sp, entries, func(e store.AuditEntry) string { return fmt.Sprint(e.ID) }), nil
}
