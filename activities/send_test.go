package activities_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"hookrelay/activities"
	"hookrelay/delivery"
	"hookrelay/signing"
	"hookrelay/store"
)

// flakyStore serves one target and fails RecordAttempt with failures
// errors before it records; it stands in for Postgres in these unit tests
// (the integration tests use the real one).
type flakyStore struct {
	target   store.Target
	loadErr  error
	failures []error
	records  []store.Attempt
	// missing lists deliveries LoadTargets does not find.
	missing []string
	// loads and batchLoads count LoadTarget and LoadTargets calls;
	// recordCalls RecordAttempts calls.
	loads, batchLoads, recordCalls int
	// claimsAlone count ClaimAttempt calls, released ReleaseClaim calls
	// (attempts may make them at once).
	claimsAlone, released atomic.Int32
	// mu guards the rest, for tests that make attempts at once.
	mu sync.Mutex
}

func (f *flakyStore) LoadTarget(context.Context, string, time.Time) (store.Target, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	return f.target, f.loadErr
}

func (f *flakyStore) LoadTargets(_ context.Context, ids []string, _ time.Time) ([]store.Target, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batchLoads++
	var out []store.Target
	for _, id := range ids {
		if slices.Contains(f.missing, id) {
			continue
		}
		t := f.target
		t.DeliveryID = id
		out = append(out, t)
	}
	return out, f.loadErr
}

// ClaimTarget loads the target and claims as the statement does: an
// enabled, unpaused endpoint with no limits and a key.
func (f *flakyStore) ClaimTarget(ctx context.Context, id string, now, _ time.Time) (store.Target, bool, error) {
	t, err := f.LoadTarget(ctx, id, now)
	return t, err == nil && !t.Inactive && !t.Paused && t.RateLimit == 0 && t.MaxInFlight == 0 && len(t.Keys) > 0, err
}

func (f *flakyStore) ClaimAttempt(context.Context, string, time.Time) (store.Claim, error) {
	f.claimsAlone.Add(1)
	return store.Claimed, nil
}

func (f *flakyStore) ReleaseClaim(context.Context, string, time.Time) error {
	f.released.Add(1)
	return nil
}

func (f *flakyStore) RecordAttempts(_ context.Context, as []store.Attempt) ([]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recordCalls++
	if len(f.failures) > 0 {
		err := f.failures[0]
		f.failures = f.failures[1:]
		return nil, err
	}
	f.records = append(f.records, as...)
	return make([]error, len(as)), nil
}

func (f *flakyStore) ReserveSlot(context.Context, string, int, time.Time) (time.Time, error) {
	return time.Now(), nil
}

func (f *flakyStore) AcquireFlight(context.Context, string, int, time.Duration) (string, bool, error) {
	return "flt_1", true, nil
}

func (f *flakyStore) ReleaseFlight(context.Context, string) error { return nil }

func (f *flakyStore) MarkDelivery(context.Context, store.Mark) (store.Marked, error) {
	return store.Marked{}, store.ErrNotFound
}

func target(t *testing.T, code int) store.Target {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }))
	t.Cleanup(srv.Close)
	secret, err := signing.GenerateSecret()
	require.NoError(t, err)
	key, err := signing.ParseSecret(secret)
	require.NoError(t, err)
	return store.Target{DeliveryID: "dlv_1", EventID: "evt_1", EndpointID: "ep_1", URL: srv.URL, Payload: []byte(`{}`),
		Keys: []signing.Key{{ID: "whk_1", Secret: key}}}
}

func send(t *testing.T, st activities.Store, req activities.SendRequest) (activities.SendResult, error) {
	a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test"}
	req.DeliveryID, req.Cycle, req.Number = "dlv_1", 1, max(req.Number, 1)
	req.Timeout = time.Second
	return a.SendSigned(context.Background(), req)
}

// TestAttemptClaimsWithItsTarget: an attempt that names its endpoint, to
// an endpoint with no limits, is claimed in the statement that loads its
// target; one with a rate limit or max_in_flight is claimed on its own once
// its slot and lease are taken, and so is one that does not name its
// endpoint, or names another (its claim with the target given back: the
// place it took was the other endpoint's).
func TestAttemptClaimsWithItsTarget(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		limit       func(*store.Target)
		claimsAlone int32
		// named is the endpoint the request names ("-": none; "": its own);
		// released the claims given back.
		named    string
		released int32
	}{
		"no limits":          {limit: func(*store.Target) {}},
		"rate limit":         {limit: func(t *store.Target) { t.RateLimit = 100 }, claimsAlone: 1},
		"max in flight":      {limit: func(t *store.Target) { t.MaxInFlight = 2 }, claimsAlone: 1},
		"endpoint not named": {limit: func(*store.Target) {}, claimsAlone: 1, named: "-"},
		"endpoint misnamed":  {limit: func(*store.Target) {}, claimsAlone: 1, named: "ep_other", released: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := &flakyStore{target: target(t, 200)}
			c.limit(&st.target)
			req := activities.SendRequest{EndpointID: st.target.EndpointID}
			switch c.named {
			case "-":
				req.EndpointID = ""
			case "":
			default:
				req.EndpointID = c.named
			}
			res, err := send(t, st, req)
			require.NoError(t, err)
			require.Equal(t, activities.ClassSuccess, res.Class)
			require.Equal(t, 1, st.loads, "one load")
			require.Equal(t, c.claimsAlone, st.claimsAlone.Load())
			require.Equal(t, c.released, st.released.Load())
			require.Len(t, st.records, 1)
		})
	}
}

// TestRecordSurvivesAShortOutage: the request was sent, so its record is
// retried while Postgres is unreachable, not lost.
func TestRecordSurvivesAShortOutage(t *testing.T) {
	t.Parallel()
	down := &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}
	st := &flakyStore{target: target(t, 200), failures: []error{down, down}}
	res, err := send(t, st, activities.SendRequest{})
	require.NoError(t, err)
	require.Equal(t, activities.ClassSuccess, res.Class)
	require.Len(t, st.records, 1)

	// Bounded: past RecordRetries the result goes to the workflow as sent
	// but unrecorded, with what its record needs, and RecordLate stores it.
	st = &flakyStore{target: target(t, 200), failures: []error{down, down, down, down}}
	res, err = send(t, st, activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 1})
	require.NoError(t, err)
	require.Equal(t, activities.RecordRetries+1, st.recordCalls)
	require.Empty(t, st.records)
	require.True(t, res.Unrecorded)
	require.Equal(t, activities.ClassSuccess, res.Class)
	require.Equal(t, []string{st.target.Keys[0].ID}, res.KeyIDs)
	a := &activities.Activities{Store: st}
	require.NoError(t, a.RecordLate(context.Background(), activities.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 1}, res))
	require.Len(t, st.records, 1)
	rec := st.records[0]
	require.Equal(t, res.KeyIDs, rec.KeyIDs)
	require.Equal(t, res.StartedAt, rec.StartedAt)
	require.Equal(t, 200, *rec.StatusCode)
	require.Equal(t, [2]int{1, 1}, [2]int{rec.Cycle, rec.Number})

	// A delivery gone meanwhile: nothing to record, and the run ends.
	st = &flakyStore{target: target(t, 200), failures: []error{store.ErrNotFound}}
	_, err = send(t, st, activities.SendRequest{})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrDeliveryGone, appErr.Type())
}

// TestNextAttemptIsPlanned: a retryable attempt's record carries when the
// workflow will make the next one; a success's does not.
func TestNextAttemptIsPlanned(t *testing.T) {
	t.Parallel()
	st := &flakyStore{target: target(t, 503)}
	set := delivery.Settings{}.WithDefaults()
	before := time.Now()
	_, err := send(t, st, activities.SendRequest{Settings: set, Deadline: before.Add(time.Hour)})
	require.NoError(t, err)
	next := st.records[0].NextAttemptAt
	require.NotNil(t, next)
	wait := delivery.Jitter(set.Schedule[1], "dlv_1", 2)
	require.WithinDuration(t, before.Add(wait), *next, time.Second)

	st = &flakyStore{target: target(t, 200)}
	_, err = send(t, st, activities.SendRequest{Settings: set, Deadline: before.Add(time.Hour)})
	require.NoError(t, err)
	require.Nil(t, st.records[0].NextAttemptAt)
}

// TestMissingRowsAndKeysAreNotRetried: a delivery whose row is gone and an
// endpoint without a valid key fail with non-retryable typed errors.
func TestMissingRowsAndKeysAreNotRetried(t *testing.T) {
	t.Parallel()
	var appErr *temporal.ApplicationError
	_, err := send(t, &flakyStore{loadErr: store.ErrNotFound}, activities.SendRequest{})
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrDeliveryGone, appErr.Type())
	require.True(t, appErr.NonRetryable())

	noKey := target(t, 200)
	noKey.Keys = nil
	st := &flakyStore{target: noKey}
	_, err = send(t, st, activities.SendRequest{})
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrNoSigningKey, appErr.Type())
	require.Empty(t, st.records, "nothing was sent, so nothing is recorded")

	a := &activities.Activities{Store: &flakyStore{}, HTTP: http.DefaultClient}
	_, err = a.MarkDelivery(context.Background(), activities.MarkRequest{DeliveryID: "dlv_gone", Status: delivery.StatusCanceled})
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, activities.ErrDeliveryGone, appErr.Type())
}

// TestSendGroupIsSendSignedForMany: a group's attempts are made as
// SendSigned makes each, with one load and one record for all; a delivery
// gone is ErrDeliveryGone; a record that fails after the same bounded
// retries leaves the sent ones unrecorded, for their workflows to record.
func TestSendGroupIsSendSignedForMany(t *testing.T) {
	t.Parallel()
	st := &flakyStore{target: target(t, 200), missing: []string{"dlv_gone"}}
	a := &activities.Activities{Store: st, HTTP: activities.NewHTTPClient(false), UserAgent: "test"}
	reqs := []activities.SendRequest{
		{DeliveryID: "dlv_a", Cycle: 1, Number: 1, Timeout: time.Second},
		{DeliveryID: "dlv_gone", Cycle: 1, Number: 1, Timeout: time.Second},
		{DeliveryID: "dlv_b", Cycle: 1, Number: 1, Timeout: time.Second},
	}
	outs, err := a.SendGroup(context.Background(), reqs)
	require.NoError(t, err)
	require.Len(t, outs, 3)
	for _, i := range []int{0, 2} {
		require.NoError(t, outs[i].Err())
		require.Equal(t, activities.ClassSuccess, outs[i].Result.Class)
		require.Equal(t, 200, outs[i].Result.StatusCode)
	}
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, outs[1].Err(), &appErr)
	require.Equal(t, activities.ErrDeliveryGone, appErr.Type())
	require.Equal(t, []int{0, 1, 1}, []int{st.loads, st.batchLoads, st.recordCalls}, "one load, one record")
	require.Len(t, st.records, 2)

	down := &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}
	st = &flakyStore{target: target(t, 503), failures: []error{down, down, down, down}}
	a.Store = st
	outs, err = a.SendGroup(context.Background(), reqs[:1])
	require.NoError(t, err)
	require.NoError(t, outs[0].Err())
	require.True(t, outs[0].Result.Unrecorded, "sent: its workflow records it")
	require.Equal(t, activities.RecordRetries+1, st.recordCalls)

	st = &flakyStore{target: target(t, 200), loadErr: down}
	a.Store = st
	_, err = a.SendGroup(context.Background(), reqs)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "nothing sent: the carrier sends each on its own")
}
