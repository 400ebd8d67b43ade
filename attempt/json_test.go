package attempt_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

// TestDurationsReadBoth: payloads write durations as Go duration strings
// and read the numbers (nanoseconds) histories recorded before hold.
func TestDurationsReadBoth(t *testing.T) {
	t.Parallel()
	set := delivery.Settings{Schedule: []time.Duration{time.Second, 30 * time.Second}, Deadline: 75 * time.Minute, RequestTimeout: 10 * time.Second}
	req := attempt.SendRequest{DeliveryID: "dlv_1", Cycle: 1, Number: 2, Timeout: 10 * time.Second, Settings: set}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	require.Contains(t, string(b), `"Timeout":"10s"`)
	require.Contains(t, string(b), `"Schedule":["1s","30s"],"Deadline":"1h15m0s","RequestTimeout":"10s","Retention":"0s"`)
	var back attempt.SendRequest
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, req, back)

	old := `{"DeliveryID":"dlv_1","Cycle":1,"Number":2,"Timeout":10000000000,` +
		`"Settings":{"Schedule":[1000000000,30000000000],"Deadline":4500000000000,"RequestTimeout":10000000000,"Retention":0},` +
		`"Deadline":"0001-01-01T00:00:00Z","Slot":"0001-01-01T00:00:00Z"}`
	var fromOld attempt.SendRequest
	require.NoError(t, json.Unmarshal([]byte(old), &fromOld))
	require.Equal(t, req, fromOld)

	res := attempt.SendResult{Number: 3, StatusCode: 429, Class: delivery.ClassThrottled, RetryAfter: 2 * time.Minute, HasRetryAfter: true}
	b, err = json.Marshal(res)
	require.NoError(t, err)
	require.Contains(t, string(b), `"RetryAfter":"2m0s"`)
	var oldRes attempt.SendResult
	require.NoError(t, json.Unmarshal([]byte(`{"Number":3,"StatusCode":429,"Class":"throttled","RetryAfter":120000000000,"HasRetryAfter":true}`), &oldRes))
	require.Equal(t, res, oldRes)

	var nilSchedule delivery.Settings
	require.NoError(t, json.Unmarshal([]byte(`{"Schedule":null,"Deadline":0,"RequestTimeout":0,"Retention":0}`), &nilSchedule))
	require.Equal(t, delivery.Settings{}, nilSchedule)

	var bad delivery.Settings
	var durErr *delivery.DurationError
	require.ErrorAs(t, json.Unmarshal([]byte(`{"Deadline":"soon"}`), &bad), &durErr)
}
