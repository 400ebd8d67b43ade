// Package access says who may do what: the roles of API keys, the
// capabilities of a portal session, the principal a request acts as, and
// the signed, expiring tokens of portal links. It is a leaf: the API, the
// portal and the store share its vocabulary.
package access

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Role is what an API key reaches.
type Role string

// Roles of API keys.
const (
	// RoleAdmin reaches every route.
	RoleAdmin Role = "admin"
	// RoleApp reaches only the routes of the one app it is bound to; every
	// other route answers 404, as for an app that does not exist.
	RoleApp Role = "app"
)

// Roles lists every role.
func Roles() []Role { return []Role{RoleAdmin, RoleApp} }

// Capability is what a portal session may do besides looking.
type Capability string

// Capabilities of a portal session.
const (
	// CapView shows endpoints, deliveries, attempts, the catalog and stats.
	CapView Capability = "view"
	// CapManageEndpoints creates, edits, disables, enables and deletes
	// endpoints and sends test events.
	CapManageEndpoints Capability = "manage_endpoints"
	// CapResend resends one delivery or the dead letters of a time range.
	CapResend Capability = "resend"
	// CapRotateSecret rotates an endpoint's signing secret.
	CapRotateSecret Capability = "rotate_secret"
)

// Capabilities lists every capability.
func Capabilities() []Capability {
	return []Capability{CapView, CapManageEndpoints, CapResend, CapRotateSecret}
}

// Bounds and defaults of portal links.
const (
	// LinkTTLDefault is how long a portal link may be opened, and how long
	// the session it opens lasts.
	LinkTTLDefault = time.Hour
	// MinLinkTTL and MaxLinkTTL bound a link's ttl.
	MinLinkTTL = time.Minute
	MaxLinkTTL = 24 * time.Hour
	// MaxLinkEndpoints bounds the endpoints a link may be limited to.
	MaxLinkEndpoints = 100
	// MaxKeyNameLength bounds an API key's name.
	MaxKeyNameLength = 128
)

// ParseCapabilities checks names against Capabilities. View is implied:
// every session may look at what it may change.
func ParseCapabilities(names []string) ([]Capability, error) {
	out := []Capability{CapView}
	for _, n := range names {
		c := Capability(n)
		if !slices.Contains(Capabilities(), c) {
			return nil, fmt.Errorf("%q is not a capability; use %v", n, Capabilities())
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Kind is what authenticated a principal.
type Kind string

// Kinds of principals.
const (
	// KindKey is an API key.
	KindKey Kind = "key"
	// KindPortal is a portal session.
	KindPortal Kind = "portal"
)

// Principal is who a request acts as.
type Principal struct {
	Kind Kind
	// ID is the key's or the session's ID; Name the key's name, or a
	// portal session's description.
	ID, Name string
	Role     Role
	// AppID is the app a RoleApp principal is bound to.
	AppID string
	// Capabilities of a portal session; a key may do everything its role
	// reaches.
	Capabilities []Capability
	// EndpointIDs limits a portal session to these endpoints (empty: all
	// of its app's).
	EndpointIDs []string
}

// Can reports whether p may do c.
func (p Principal) Can(c Capability) bool {
	return p.Kind == KindKey || slices.Contains(p.Capabilities, c)
}

// ReachesApp reports whether p may reach app's routes.
func (p Principal) ReachesApp(appID string) bool {
	return p.Role == RoleAdmin || (p.Role == RoleApp && p.AppID == appID)
}

// Limited reports whether p is limited to some endpoints.
func (p Principal) Limited() bool { return len(p.EndpointIDs) > 0 }

// SeesEndpoint reports whether p may see endpoint id and its deliveries.
func (p Principal) SeesEndpoint(id string) bool {
	return !p.Limited() || slices.Contains(p.EndpointIDs, id)
}

type principalKey struct{}

// NewContext returns ctx carrying p. Only code in this process can set it:
// the API sets the principal its request authenticated as.
func NewContext(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
