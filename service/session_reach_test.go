package service_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/access"
	"hookrelay/service"
)

// TestSessionMakesNoOperatorCall: a portal session reaches its app's
// deliveries, endpoints and events as its capabilities and endpoint limit
// allow, never the calls that would widen them (a new portal link with
// every capability and no limit), change the app (its retention prunes
// deliveries) or read the app's audit log (the paths of every endpoint,
// the names of every key). The service is where authorization happens:
// these refusals cannot be left to which adapter happens to call what.
func TestSessionMakesNoOperatorCall(t *testing.T) {
	t.Parallel()
	svc, _, app := fixture(t)
	ctx := context.Background()
	seen, hidden := endpoint(t, svc, app.ID), endpoint(t, svc, app.ID)
	viewer := access.Principal{Kind: access.KindPortal, ID: "ps_view", Role: access.RoleApp, AppID: app.ID,
		Capabilities: []access.Capability{access.CapView}, EndpointIDs: []string{seen.ID}}

	var notFound *service.NotFoundError
	_, err := svc.CreatePortalLink(ctx, viewer, app.ID, service.PortalLinkInput{
		Capabilities: []string{string(access.CapManageEndpoints), string(access.CapResend), string(access.CapRotateSecret)}})
	require.ErrorAs(t, err, &notFound, "a view-only session limited to one endpoint minted a link with every capability and no limit")

	_, err = svc.PatchApp(ctx, viewer, app.ID, service.AppInput{Name: ptr("renamed")})
	require.ErrorAs(t, err, &notFound, "a view-only portal session changed the app")

	_, err = svc.ListAudit(ctx, viewer, app.ID, service.Page{})
	require.ErrorAs(t, err, &notFound, "a limited session read the audit log, which names its hidden endpoints")
	require.Equal(t, service.MsgNoSuchRoute, notFound.Detail)

	// Through the service only: a key may still make each of them.
	key := access.Principal{Kind: access.KindKey, ID: "key_app", Name: "billing", Role: access.RoleApp, AppID: app.ID}
	_, err = svc.CreatePortalLink(ctx, key, app.ID, service.PortalLinkInput{EndpointIDs: []string{hidden.ID}})
	require.NoError(t, err)
	_, err = svc.ListAudit(ctx, key, app.ID, service.Page{})
	require.NoError(t, err)
}

// TestLimitedSessionListsOnlyItsEvents: an event only a hidden endpoint
// got is not listed to a session limited to another (GetEvent answers it
// 404; the list must not show its payload either).
func TestLimitedSessionListsOnlyItsEvents(t *testing.T) {
	t.Parallel()
	svc, _, app := fixture(t)
	ctx := context.Background()
	seen, hidden := endpoint(t, svc, app.ID), endpoint(t, svc, app.ID)
	ev, err := svc.SendTest(ctx, admin, app.ID, hidden.ID)
	require.NoError(t, err)
	sess := access.Principal{Kind: access.KindPortal, ID: "ps_lim", Role: access.RoleApp, AppID: app.ID,
		Capabilities: []access.Capability{access.CapView}, EndpointIDs: []string{seen.ID}}

	var notFound *service.NotFoundError
	_, err = svc.GetEvent(ctx, sess, app.ID, ev.ID)
	require.ErrorAs(t, err, &notFound)

	l, err := svc.ListEvents(ctx, sess, app.ID, service.EventQuery{}, service.Page{})
	for _, v := range l.Data {
		require.NotEqual(t, ev.ID, v.ID, "a session limited to %s listed an event only %s got", seen.ID, hidden.ID)
	}
	var forbidden *service.ForbiddenError
	require.ErrorAs(t, err, &forbidden)

	all, err := svc.ListEvents(ctx, admin, app.ID, service.EventQuery{}, service.Page{})
	require.NoError(t, err)
	require.Len(t, all.Data, 1)
}
