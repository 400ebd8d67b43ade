package store_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
	"hookrelay/store"
)

func (f fixture) startRow(t *testing.T, dlv string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, f.st.Pool().QueryRow(context.Background(),
		`SELECT id FROM outbox WHERE delivery_id = $1 AND kind = 'start'`, dlv).Scan(&id))
	return id
}

// rowState is "gone", "no outcome" or the row's outcome.
func (f fixture) rowState(t *testing.T, id int64) string {
	t.Helper()
	var out *string
	err := f.st.Pool().QueryRow(context.Background(), `SELECT outcome::text FROM outbox WHERE id = $1`, id).Scan(&out)
	if err != nil {
		return "gone"
	}
	if out == nil {
		return "no outcome"
	}
	return *out
}

// TestRecordEndsOnlySucceededStartRows: in one RecordAttempts batch,
// each attempt acts on its own start row only: a sender's 2xx deletes its
// row (also when its delivery is gone), a sender's failure keeps its row with
// the outcome, and a workflow's 2xx (no OutboxID) leaves every start row
// alone. The arrays stay aligned whatever the order of the attempts.
func TestRecordEndsOnlySucceededStartRows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	ok, fail, gone, wf := f.publish(t), f.publish(t), f.publish(t), f.publish(t)
	rOK, rFail, rGone, rWF := f.startRow(t, ok), f.startRow(t, fail), f.startRow(t, gone), f.startRow(t, wf)
	_, err := f.st.Pool().Exec(ctx, `DELETE FROM deliveries WHERE id = $1`, gone)
	require.NoError(t, err)

	c200, c500 := 200, 500
	now := time.Now()
	outcome := func(class string) []byte {
		b, err := json.Marshal(map[string]string{"class": class})
		require.NoError(t, err)
		return b
	}
	attempts := []store.Attempt{
		{DeliveryID: wf, Cycle: 1, Number: 1, StartedAt: now, StatusCode: &c200, Class: string(delivery.ClassSuccess)},
		{DeliveryID: fail, Cycle: 1, Number: 1, StartedAt: now, StatusCode: &c500, Class: string(delivery.ClassRetryable),
			OutboxID: rFail, Outcome: outcome("retryable")},
		{DeliveryID: gone, Cycle: 1, Number: 1, StartedAt: now, StatusCode: &c200, Class: string(delivery.ClassSuccess),
			OutboxID: rGone, Outcome: outcome("success")},
		{DeliveryID: ok, Cycle: 1, Number: 1, StartedAt: now, StatusCode: &c200, Class: string(delivery.ClassSuccess),
			OutboxID: rOK, Outcome: outcome("success")},
	}
	errs, err := f.st.RecordAttempts(ctx, attempts)
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], store.ErrNotFound)
	require.NoError(t, errs[3])

	require.Equal(t, "gone", f.rowState(t, rOK), "a sender's 2xx ends its start row")
	require.Equal(t, "gone", f.rowState(t, rGone), "a 2xx of a deleted delivery ends its start row")
	require.JSONEq(t, `{"class":"retryable"}`, f.rowState(t, rFail), "a failure keeps its row, with its outcome")
	require.Equal(t, "no outcome", f.rowState(t, rWF), "a workflow's attempt touches no start row")

	d, err := f.st.GetDelivery(ctx, f.app.ID, ok)
	require.NoError(t, err)
	require.Equal(t, delivery.StatusSucceeded, d.Status)
}

// TestBatchedSendersEndTheirOwnRows: concurrent senders' records,
// coalesced by store.Batched, each end (or keep) their own start row.
func TestBatchedSendersEndTheirOwnRows(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	b := f.batched(t)
	const n = 40
	dlvs, rows := make([]string, n), make([]int64, n)
	for i := range n {
		dlvs[i] = f.publish(t)
		rows[i] = f.startRow(t, dlvs[i])
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code, class := 200, delivery.ClassSuccess
			if i%2 == 1 {
				code, class = 503, delivery.ClassRetryable
			}
			errs, err := b.RecordAttempts(ctx, []store.Attempt{{DeliveryID: dlvs[i], Cycle: 1, Number: 1, StartedAt: time.Now(),
				StatusCode: &code, Class: string(class), OutboxID: rows[i], Outcome: []byte(`{"i":` + string(rune('0'+i%10)) + `}`)}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
		})
	}
	wg.Wait()
	for i := range n {
		if i%2 == 0 {
			require.Equal(t, "gone", f.rowState(t, rows[i]), "row %d", i)
		} else {
			require.JSONEq(t, `{"i":`+string(rune('0'+i%10))+`}`, f.rowState(t, rows[i]), "row %d", i)
		}
	}
}
