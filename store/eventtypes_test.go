package store_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"hookrelay/outbox"
	"hookrelay/store"
)

// appCatalog lists the names of app's catalog.
func appCatalog(t *testing.T, st *store.Store, appID string) []string {
	t.Helper()
	ets, err := st.ListAppEventTypes(context.Background(), appID, store.Page{Limit: 100})
	require.NoError(t, err)
	var names []string
	for _, et := range ets {
		names = append(names, et.Name)
	}
	return names
}

// TestCatalogMigrationSplitsAppTypes: migration 015 turns the one shared
// catalog of before into per-app ones: a bare type that events used is the
// type of each app that used it; a described type, an unused one and the
// operational types stay everyone's. Down and up again, it holds.
func TestCatalogMigrationSplitsAppTypes(t *testing.T) {
	ctx := context.Background()
	st := pg.Store(t, "catalogmigration")
	db := stdlib.OpenDBFromPool(st.Pool())
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS("../migrations"))
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 14)
	require.NoError(t, err)

	a, err := st.CreateApp(ctx, store.App{Name: "a"})
	require.NoError(t, err)
	b, err := st.CreateApp(ctx, store.App{Name: "b"})
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `INSERT INTO event_types (name, description) VALUES
		('shared.described', 'The operator wrote this.'), ('a.used', ''), ('both.used', ''), ('nobody.used', '')`)
	require.NoError(t, err)
	_, err = st.Pool().Exec(ctx, `INSERT INTO events (app_id, id, type, payload, payload_hash, created) VALUES
		($1, 'e1', 'a.used', '\x7b7d', '\x00', now()), ($1, 'e2', 'both.used', '\x7b7d', '\x00', now()),
		($2, 'e3', 'both.used', '\x7b7d', '\x00', now()), ($2, 'e4', 'shared.described', '\x7b7d', '\x00', now())`, a.ID, b.ID)
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 15)
	require.NoError(t, err)

	require.Equal(t, []string{"a.used", "both.used", "nobody.used", "shared.described"}, appCatalog(t, st, a.ID))
	require.Equal(t, []string{"both.used", "nobody.used", "shared.described"}, appCatalog(t, st, b.ID))
	require.Subset(t, appCatalog(t, st, store.OperationsApp), store.OperationalTypes(), "the operational types stay the operator's")
}

// TestAppEventTypes: a type new to an app joins its catalog alone, up to
// the bound (an *EventTypeLimitError past it); known types, the operator's
// types and other apps are not bounded by it; an unknown app is
// ErrNotFound; a type published in a producer's own transaction joins its
// app's catalog too.
func TestAppEventTypes(t *testing.T) {
	ctx := context.Background()
	f := setup(t)
	other, err := f.st.CreateApp(ctx, store.App{Name: "other"})
	require.NoError(t, err)
	_, err = f.st.CreateEventType(ctx, store.EventType{Name: "shared.defined"})
	require.NoError(t, err)
	for _, typ := range []string{"a.one", "a.two", "a.one", "shared.defined"} {
		require.NoError(t, f.st.AddAppEventType(ctx, f.app.ID, typ, 2), typ)
	}
	err = f.st.AddAppEventType(ctx, f.app.ID, "a.three", 2)
	var limit *store.EventTypeLimitError
	require.ErrorAs(t, err, &limit)
	require.Equal(t, 2, limit.Limit)
	require.NoError(t, f.st.AddAppEventType(ctx, other.ID, "a.three", 2))
	require.ErrorIs(t, f.st.AddAppEventType(ctx, "app_missing", "a.one", 2), store.ErrNotFound)

	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = outbox.Publish(ctx, tx, other.ID, outbox.Event{Type: "b.library", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	require.Equal(t, []string{"a.one", "a.two", "shared.defined"}, appCatalog(t, f.st, f.app.ID))
	require.Equal(t, []string{"a.three", "b.library", "shared.defined"}, appCatalog(t, f.st, other.ID))
	known, err := f.st.KnowsEventType(ctx, f.app.ID, "b.library")
	require.NoError(t, err)
	require.False(t, known, "another app's type")
}
