package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/api"
	"hookrelay/delivery"
	"hookrelay/outbox"
	"hookrelay/store"
)

// send calls h with a bearer key (from the given client address) and
// returns the whole answer, headers included.
func send(t *testing.T, h http.Handler, key, method, path string, body any) *httptest.ResponseRecorder {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	if body == nil {
		raw = nil
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+key)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// event is an ingest body of type typ.
func event(typ string, i int) map[string]any {
	return map[string]any{"type": typ, "data": map[string]any{"i": i}}
}

// problemOf decodes a problem answer.
func problemOf(t *testing.T, rec *httptest.ResponseRecorder) api.Problem {
	t.Helper()
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), rec.Body.String())
	var p api.Problem
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	return p
}

// appKey makes an app key for appID and returns it.
func appKey(t *testing.T, h http.Handler, admin, appID, name string) string {
	t.Helper()
	rec := send(t, h, admin, "POST", "/v1/api-keys", map[string]any{"name": name, "role": "app", "app_id": appID})
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var k keyAnswer
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &k))
	return k.Key
}

// TestBacklogShedsPerApp: an app past its own backlog bound gets 429 with
// Retry-After and no other app does, whether its rows are new events held
// for a paused endpoint or a range replay's.
func TestBacklogShedsPerApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, held, admin := tenant(t, "shed")
	calm, err := st.CreateApp(ctx, store.App{Name: "calm"})
	require.NoError(t, err)
	replayed, err := st.CreateApp(ctx, store.App{Name: "replayed"})
	require.NoError(t, err)
	const bound = 3
	h := api.New(api.Options{Store: st, AllowPrivateTargets: true, MaxBacklog: bound}).Handler()
	for _, app := range []string{held.ID, calm.ID} {
		rec := send(t, h, admin, "POST", "/v1/apps/"+app+"/endpoints", map[string]any{"url": "http://127.0.0.1:9/hook", "paused": app == held.ID})
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	}

	// The paused endpoint's rows wait in the outbox (no dispatcher runs
	// here either): the fifth event is past the bound of 3.
	accepted := 0
	var shed *httptest.ResponseRecorder
	for i := range 10 {
		rec := send(t, h, admin, "POST", "/v1/apps/"+held.ID+"/events", event("order.held", i))
		if rec.Code == http.StatusTooManyRequests {
			shed = rec
			break
		}
		require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
		accepted++
	}
	require.NotNil(t, shed, "the held app is shed")
	require.Equal(t, bound+1, accepted)
	require.Equal(t, "1", shed.Header().Get("Retry-After"))
	require.Contains(t, problemOf(t, shed).Detail, "this app's delivery backlog")
	for i := range bound - 1 {
		rec := send(t, h, admin, "POST", "/v1/apps/"+calm.ID+"/events", event("order.calm", i))
		require.Equal(t, http.StatusAccepted, rec.Code, "another app is never shed for it: %s", rec.Body.String())
	}

	// A range replay of 5 dead letters fills the third app's backlog.
	ep, _, err := st.CreateEndpoint(ctx, store.Endpoint{AppID: replayed.ID, URL: "http://127.0.0.1:9/r", Environment: "live", EventTypes: []string{},
		Headers: map[string]string{}, RetrySchedule: []time.Duration{time.Second}, Deadline: time.Hour, RequestTimeout: time.Second})
	require.NoError(t, err)
	for i := range 5 {
		pub, err := outbox.PublishNow(ctx, st.Pool(), replayed.ID, outbox.Event{Type: "order.replayed", Data: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)})
		require.NoError(t, err)
		_, err = st.MarkDelivery(ctx, store.Mark{DeliveryID: pub.Deliveries[0].ID, Status: delivery.StatusDeadLettered, Reason: "failed", Cycle: 1})
		require.NoError(t, err)
	}
	_, err = st.Pool().Exec(ctx, `DELETE FROM outbox WHERE app_id = $1`, replayed.ID) // as a dispatcher would have
	require.NoError(t, err)
	rec := send(t, h, admin, "POST", "/v1/apps/"+replayed.ID+"/events", event("order.replayed", 99))
	require.Equal(t, http.StatusAccepted, rec.Code, "no backlog before the replay: %s", rec.Body.String())
	_, err = st.Pool().Exec(ctx, `DELETE FROM outbox WHERE app_id = $1`, replayed.ID)
	require.NoError(t, err)
	rec = send(t, h, admin, "POST", "/v1/apps/"+replayed.ID+"/endpoints/"+ep.ID+"/replay", map[string]any{"since": time.Now().Add(-time.Hour).Format(time.RFC3339)})
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	require.Eventually(t, func() bool {
		return send(t, h, admin, "POST", "/v1/apps/"+replayed.ID+"/events", event("order.replayed", 100)).Code == http.StatusTooManyRequests
	}, 5*time.Second, 50*time.Millisecond, "the replay's rows count against its app")
	rec = send(t, h, admin, "POST", "/v1/apps/"+calm.ID+"/events", event("order.calm", 100))
	require.Equal(t, http.StatusAccepted, rec.Code, "within its own bound: %s", rec.Body.String())
	require.Equal(t, http.StatusTooManyRequests, send(t, h, admin, "POST", "/v1/apps/"+held.ID+"/events", event("order.held", 100)).Code)
}

// TestWatchBacklogFollowsTheOutbox: with WatchBacklog running, an app shed
// for its backlog is served again soon after its outbox drains.
func TestWatchBacklogFollowsTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, app, admin := tenant(t, "watch")
	srv := api.New(api.Options{Store: st, AllowPrivateTargets: true, MaxBacklog: 1})
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go srv.WatchBacklog(wctx)
	h := srv.Handler()
	require.Equal(t, http.StatusCreated, send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/endpoints", map[string]any{"url": "http://127.0.0.1:9/hook"}).Code)
	for i := range 2 {
		require.Equal(t, http.StatusAccepted, send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/events", event("order.watch", i)).Code)
	}
	require.Equal(t, http.StatusTooManyRequests, send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/events", event("order.watch", 2)).Code)
	_, err := st.Pool().Exec(ctx, `DELETE FROM outbox`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/events", event("order.watch", 3)).Code == http.StatusAccepted
	}, 3*time.Second, 50*time.Millisecond)
}

// TestIngestRateLimitPerAppKey: an app key past its rate and burst gets 429
// with Retry-After; another key, of the same app or another, is not
// affected, nor is an admin key.
func TestIngestRateLimitPerAppKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, app, admin := tenant(t, "rate")
	other, err := st.CreateApp(ctx, store.App{Name: "other"})
	require.NoError(t, err)
	h := api.New(api.Options{Store: st, IngestRate: 1, IngestBurst: 3}).Handler()
	fast, second, theirs := appKey(t, h, admin, app.ID, "fast"), appKey(t, h, admin, app.ID, "second"), appKey(t, h, admin, other.ID, "theirs")
	for i := range 3 {
		rec := send(t, h, fast, "POST", "/v1/apps/"+app.ID+"/events", event("order.rate", i))
		require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	}
	rec := send(t, h, fast, "POST", "/v1/apps/"+app.ID+"/events", event("order.rate", 3))
	require.Equal(t, http.StatusTooManyRequests, rec.Code, rec.Body.String())
	wait, err := strconv.Atoi(rec.Header().Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, 1, wait, "one token a second")
	require.Equal(t, "https://hookrelay.dev/problems/too-many-requests", problemOf(t, rec).Type)
	var stored int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&stored))
	require.Equal(t, 3, stored, "the refused event is not stored")
	require.Equal(t, http.StatusOK, send(t, h, fast, "GET", "/v1/apps/"+app.ID, nil).Code, "only ingest is limited")
	require.Equal(t, http.StatusAccepted, send(t, h, second, "POST", "/v1/apps/"+app.ID+"/events", event("order.rate", 4)).Code)
	require.Equal(t, http.StatusAccepted, send(t, h, theirs, "POST", "/v1/apps/"+other.ID+"/events", event("order.rate", 5)).Code)
	for i := range 5 {
		require.Equal(t, http.StatusAccepted, send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/events", event("order.rate", 10+i)).Code)
	}
	require.Eventually(t, func() bool {
		return send(t, h, fast, "POST", "/v1/apps/"+app.ID+"/events", event("order.rate", 20)).Code == http.StatusAccepted
	}, 3*time.Second, 100*time.Millisecond, "the bucket refills")
}

// catalogOf lists the names of an app's catalog as key sees it.
func catalogOf(t *testing.T, h http.Handler, key, appID string) []string {
	t.Helper()
	var names []string
	cursor := ""
	for {
		rec := send(t, h, key, "GET", "/v1/apps/"+appID+"/event-types?limit=2&cursor="+cursor, nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var page struct {
			Data       []store.EventType `json:"data"`
			NextCursor *string           `json:"next_cursor"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
		for _, et := range page.Data {
			names = append(names, et.Name)
		}
		if page.NextCursor == nil {
			return names
		}
		cursor = *page.NextCursor
	}
}

// TestCatalogIsPerApp: an app's catalog holds the operator's types and the
// types its own events used (through the API or a producer's own
// transaction), never another app's; a type the operator describes joins
// every catalog.
func TestCatalogIsPerApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, a, admin := tenant(t, "catalog")
	b, err := st.CreateApp(ctx, store.App{Name: "b"})
	require.NoError(t, err)
	h := api.New(api.Options{Store: st}).Handler()
	keyA, keyB := appKey(t, h, admin, a.ID, "a"), appKey(t, h, admin, b.ID, "b")
	require.Equal(t, http.StatusCreated, send(t, h, admin, "POST", "/v1/event-types", map[string]any{"name": "shared.defined"}).Code)
	require.Equal(t, http.StatusAccepted, send(t, h, keyA, "POST", "/v1/apps/"+a.ID+"/events", event("acme.secret_launch", 1)).Code)
	require.Equal(t, http.StatusAccepted, send(t, h, keyA, "POST", "/v1/apps/"+a.ID+"/events", event("shared.defined", 2)).Code)
	require.Equal(t, http.StatusAccepted, send(t, h, keyB, "POST", "/v1/apps/"+b.ID+"/events", event("globex.merger", 1)).Code)
	tx, err := st.Pool().Begin(ctx)
	require.NoError(t, err)
	_, err = outbox.Publish(ctx, tx, b.ID, outbox.Event{Type: "globex.from_library", Data: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	require.Equal(t, []string{"acme.secret_launch", "shared.defined"}, catalogOf(t, h, keyA, a.ID))
	require.Equal(t, []string{"globex.from_library", "globex.merger", "shared.defined"}, catalogOf(t, h, keyB, b.ID))
	require.Equal(t, catalogOf(t, h, keyA, a.ID), catalogOf(t, h, admin, a.ID), "an admin sees the app's catalog as the app does")

	// Described by the operator, a type is everyone's.
	rec := send(t, h, admin, "PATCH", "/v1/event-types/globex.merger", map[string]any{"description": "Two companies merged."})
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, []string{"acme.secret_launch", "globex.merger", "shared.defined"}, catalogOf(t, h, keyA, a.ID))
	require.Equal(t, http.StatusConflict, send(t, h, admin, "POST", "/v1/event-types", map[string]any{"name": "acme.secret_launch"}).Code)
}

// TestAppEventTypesAreBounded: past its bound of new types an app's event
// of one more new type is a 422 naming type that stores nothing; known
// types, the operator's types and other apps are unaffected; concurrent
// new types never overshoot the bound.
func TestAppEventTypesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, app, admin := tenant(t, "bounded")
	other, err := st.CreateApp(ctx, store.App{Name: "other"})
	require.NoError(t, err)
	const bound = 5
	h := api.New(api.Options{Store: st, MaxAppEventTypes: bound}).Handler()
	require.Equal(t, http.StatusCreated, send(t, h, admin, "POST", "/v1/event-types", map[string]any{"name": "shared.defined"}).Code)

	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Go(func() {
			codes[i] = send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/events", event(fmt.Sprintf("burst.type_%02d", i), i)).Code
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	require.Equal(t, map[int]int{http.StatusAccepted: bound, http.StatusUnprocessableEntity: 20 - bound}, count)

	rec := send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/events", event("one.more", 1))
	require.Equal(t, http.StatusUnprocessableEntity, rec.Code)
	p := problemOf(t, rec)
	require.Equal(t, []string{"type"}, p.Fields)
	require.Contains(t, p.Detail, "5 event types of its own")
	var events, types int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM events WHERE app_id = $1), (SELECT count(*) FROM app_event_types WHERE app_id = $1)`, app.ID).
		Scan(&events, &types))
	require.Equal(t, []int{bound, bound}, []int{events, types}, "a refused event stores nothing")

	known := ""
	for i, c := range codes {
		if c == http.StatusAccepted {
			known = fmt.Sprintf("burst.type_%02d", i)
		}
	}
	require.Equal(t, http.StatusAccepted, send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/events", event(known, 2)).Code, "a known type")
	require.Equal(t, http.StatusAccepted, send(t, h, admin, "POST", "/v1/apps/"+app.ID+"/events", event("shared.defined", 3)).Code, "the operator's type")
	require.Equal(t, http.StatusAccepted, send(t, h, admin, "POST", "/v1/apps/"+other.ID+"/events", event("one.more", 4)).Code, "another app")
	require.Len(t, catalogOf(t, h, admin, app.ID), bound+1)
}
