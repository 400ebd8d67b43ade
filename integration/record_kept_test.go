package integration

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/activities"
	"hookrelay/config"
	"hookrelay/delivery"
)

// TestSentAttemptKeptWhenItsRecordFails: Postgres refuses every attempt's
// record (a trigger raising a serialization failure) for longer than the
// send activity retries it. The request reached the receiver, so it must
// be in the log once the database takes records again, and never be sent
// a second time for want of a record: in each first-attempt mode, the
// delivery's workflow records it late and judges it.
func TestSentAttemptKeptWhenItsRecordFails(t *testing.T) {
	for _, mode := range []string{config.FirstAttemptsWorkflow, config.FirstAttemptsSender, config.FirstAttemptsCarrier} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, inMode(mode))
			ctx := context.Background()
			_, err := h.store.Pool().Exec(ctx, `
				CREATE TABLE refuse_records (since timestamptz);
				CREATE SEQUENCE refusals;
				CREATE FUNCTION refuse_record() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF EXISTS (SELECT 1 FROM refuse_records) THEN
						PERFORM nextval('refusals'); -- kept when the statement fails
						RAISE EXCEPTION 'record refused by the test' USING ERRCODE = '40001';
					END IF;
					RETURN NEW;
				END $$;
				CREATE TRIGGER refuse_record BEFORE INSERT ON attempts FOR EACH ROW EXECUTE FUNCTION refuse_record();
				INSERT INTO refuse_records VALUES (now());`)
			require.NoError(t, err)
			appID := h.createApp()
			rc := newReceiver(t, nil)
			h.createEndpoint(appID, map[string]any{"url": rc.URL(), "retry_schedule": []string{"1s", "1s", "1s"}})
			ev := h.send(appID, "order.paid", map[string]any{"n": 1})
			require.Eventually(t, func() bool { return len(rc.receipts()) == 1 }, 20*time.Second, 10*time.Millisecond)
			// Refused past the activity's own retries (1 + RecordRetries
			// statements) and two more: the workflow's record retries.
			require.Eventually(t, func() bool {
				var n int64
				require.NoError(t, h.store.Pool().QueryRow(ctx, `SELECT last_value FROM refusals`).Scan(&n))
				return n >= activities.RecordRetries+3
			}, 30*time.Second, 20*time.Millisecond, "records refused")
			_, err = h.store.Pool().Exec(ctx, `DELETE FROM refuse_records`)
			require.NoError(t, err)
			d := h.waitDelivery(appID, ev.Deliveries[0].ID, 30*time.Second, delivery.StatusSucceeded)
			require.Equal(t, 1, d.AttemptCount)
			atts := h.attempts(appID, d.ID)
			require.Len(t, atts, 1)
			require.Equal(t, string(delivery.ClassSuccess), atts[0].Class)
			require.NotEmpty(t, atts[0].KeyIDs, "the record names the keys the request was signed with")
			got := rc.receipts()
			require.Equal(t, 1, len(got), "sent once")
			require.WithinDuration(t, got[0].At, atts[0].StartedAt, time.Second)
			if mode != config.FirstAttemptsSender {
				h.keepHistory("v14-record-late-"+mode, d.ID, "")
			}
		})
	}
}
