package service_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/access"
	"hookrelay/internal/testenv"
	"hookrelay/service"
	"hookrelay/store"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &pg)) }

var admin = access.Principal{Kind: access.KindKey, ID: "key_admin", Name: "operator", Role: access.RoleAdmin}

// fixture is a service on its own database with one app.
func fixture(t *testing.T) (*service.Service, *store.Store, store.App) {
	t.Helper()
	st := pg.Store(t, "service")
	app, err := st.CreateApp(context.Background(), store.App{Name: "Acme"})
	require.NoError(t, err)
	return service.New(service.Options{Store: st, AllowPrivateTargets: true, LinkSigner: access.NewSigner([]byte("service test"))}), st, app
}

func ptr[T any](v T) *T { return &v }

func endpoint(t *testing.T, svc *service.Service, appID string) service.Endpoint {
	t.Helper()
	e, err := svc.CreateEndpoint(context.Background(), admin, appID, service.EndpointInput{URL: ptr("http://127.0.0.1:9/hook")})
	require.NoError(t, err)
	return e
}

// TestTypedErrors: each refusal is its typed error, never a message to
// parse.
func TestTypedErrors(t *testing.T) {
	t.Parallel()
	svc, _, app := fixture(t)
	ctx := context.Background()
	e := endpoint(t, svc, app.ID)

	_, err := svc.CreateEndpoint(ctx, admin, app.ID, service.EndpointInput{URL: ptr("ftp://example.com/")})
	var invalid *service.InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "url", invalid.Field)

	_, err = svc.PatchEndpoint(ctx, admin, app.ID, e.ID, service.EndpointInput{RateLimit: ptr(-1)})
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "rate_limit", invalid.Field)

	_, err = svc.ListEndpoints(ctx, admin, app.ID, service.Page{Limit: service.MaxPageLimit + 1})
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "limit", invalid.Field)

	var notFound *service.NotFoundError
	_, err = svc.GetEndpoint(ctx, admin, app.ID, "ep_missing")
	require.ErrorAs(t, err, &notFound)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = svc.GetDelivery(ctx, admin, app.ID, "dlv_missing")
	require.ErrorAs(t, err, &notFound)

	var conflict *service.ConflictError
	require.ErrorAs(t, svc.DeleteApp(ctx, admin, store.OperationsApp), &conflict)
	require.Equal(t, "app", conflict.Field)

	_, err = svc.PatchEndpoint(ctx, admin, app.ID, e.ID, service.EndpointInput{Disabled: ptr(true)})
	require.NoError(t, err)
	_, err = svc.ReplayEndpoint(ctx, admin, app.ID, e.ID, service.ReplayRange{Since: ptr(time.Now().Add(-time.Hour))})
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, "endpoint_id", conflict.Field)

	_, err = svc.ReplayEndpoint(ctx, admin, app.ID, e.ID, service.ReplayRange{})
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, "since", invalid.Field)
}

// TestAppKeyReachesOnlyItsApp: one app's key cannot read another app's
// endpoint, nor make an operator's call; it is told the app does not
// exist.
func TestAppKeyReachesOnlyItsApp(t *testing.T) {
	t.Parallel()
	svc, st, app := fixture(t)
	ctx := context.Background()
	other, err := st.CreateApp(ctx, store.App{Name: "Globex"})
	require.NoError(t, err)
	theirs := endpoint(t, svc, other.ID)
	key := access.Principal{Kind: access.KindKey, ID: "key_a", Name: "billing", Role: access.RoleApp, AppID: app.ID}

	var notFound *service.NotFoundError
	_, err = svc.GetEndpoint(ctx, key, other.ID, theirs.ID)
	require.ErrorAs(t, err, &notFound)
	_, err = svc.ListEndpoints(ctx, key, other.ID, service.Page{})
	require.ErrorAs(t, err, &notFound)
	_, err = svc.GetEndpoint(ctx, key, app.ID, theirs.ID)
	require.ErrorAs(t, err, &notFound, "under its own app, another app's endpoint does not exist")
	_, err = svc.CreateApp(ctx, key, service.AppInput{Name: ptr("mine")})
	require.ErrorAs(t, err, &notFound)
	require.Equal(t, service.MsgNoSuchRoute, notFound.Detail)

	mine, err := svc.CreateEndpoint(ctx, key, app.ID, service.EndpointInput{URL: ptr("http://127.0.0.1:9/mine")})
	require.NoError(t, err)
	got, err := svc.GetEndpoint(ctx, key, app.ID, mine.ID)
	require.NoError(t, err)
	require.Equal(t, mine.ID, got.ID)
}

// TestLimitedSession: a portal session limited to one endpoint sees,
// changes and creates nothing else, and needs its capabilities.
func TestLimitedSession(t *testing.T) {
	t.Parallel()
	svc, _, app := fixture(t)
	ctx := context.Background()
	seen, hidden := endpoint(t, svc, app.ID), endpoint(t, svc, app.ID)
	sess := access.Principal{Kind: access.KindPortal, ID: "ps_1", Role: access.RoleApp, AppID: app.ID,
		Capabilities: []access.Capability{access.CapView, access.CapManageEndpoints}, EndpointIDs: []string{seen.ID}}

	l, err := svc.ListEndpoints(ctx, sess, app.ID, service.Page{})
	require.NoError(t, err)
	require.Len(t, l.Data, 1)
	require.Equal(t, seen.ID, l.Data[0].ID)

	var notFound *service.NotFoundError
	_, err = svc.GetEndpoint(ctx, sess, app.ID, hidden.ID)
	require.ErrorAs(t, err, &notFound)
	require.ErrorAs(t, svc.DeleteEndpoint(ctx, sess, app.ID, hidden.ID), &notFound)
	_, err = svc.ListDeliveries(ctx, sess, app.ID, service.DeliveryQuery{EndpointIDs: []string{hidden.ID}}, service.Page{})
	require.ErrorAs(t, err, &notFound)

	var forbidden *service.ForbiddenError
	_, err = svc.CreateEndpoint(ctx, sess, app.ID, service.EndpointInput{URL: ptr("http://127.0.0.1:9/new")})
	require.ErrorAs(t, err, &forbidden, "what it made would lie outside its limit")
	_, err = svc.RotateSecret(ctx, sess, app.ID, seen.ID, service.RotateInput{})
	require.ErrorAs(t, err, &forbidden, "no rotate_secret capability")

	_, err = svc.PatchEndpoint(ctx, sess, app.ID, seen.ID, service.EndpointInput{Description: ptr("mine")})
	require.NoError(t, err)
}

// TestAuditWrittenOnce: a change is audited once, as the REST route that
// serves it, whoever made it; a read or a refusal is not.
func TestAuditWrittenOnce(t *testing.T) {
	t.Parallel()
	svc, st, app := fixture(t)
	ctx := context.Background()
	sess := access.Principal{Kind: access.KindPortal, ID: "ps_2", Name: "portal session", Role: access.RoleApp, AppID: app.ID,
		Capabilities: []access.Capability{access.CapView, access.CapManageEndpoints}}
	e, err := svc.CreateEndpoint(ctx, sess, app.ID, service.EndpointInput{URL: ptr("http://127.0.0.1:9/hook")})
	require.NoError(t, err)
	_, err = svc.GetEndpoint(ctx, sess, app.ID, e.ID)
	require.NoError(t, err)
	_, err = svc.PatchEndpoint(ctx, sess, app.ID, e.ID, service.EndpointInput{URL: ptr("not a url")})
	require.Error(t, err)
	_, err = svc.TestFilter(ctx, sess, app.ID, e.ID, service.FilterTestInput{})
	require.NoError(t, err)

	l, err := svc.ListAudit(ctx, admin, app.ID, service.Page{})
	require.NoError(t, err)
	require.Len(t, l.Data, 1)
	got := l.Data[0]
	require.Equal(t, []any{access.KindPortal, "ps_2", "POST", "/v1/apps/:app/endpoints", "/v1/apps/" + app.ID + "/endpoints", 201},
		[]any{got.ActorKind, got.ActorID, got.Method, got.Route, got.Path, got.Status})
	var n int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&n))
	require.Equal(t, 1, n)
}
