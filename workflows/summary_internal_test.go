package workflows

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"hookrelay/attempt"
	"hookrelay/delivery"
)

func TestSummaries(t *testing.T) {
	t.Parallel()
	in := Input{
		DeliveryID: "dlv_1", AppID: "app_1", AppName: "acme", EventID: "evt_1", EventType: "payment.succeeded",
		EndpointID: "ep_1", EndpointHost: EndpointHost("https://api.acme.com/hooks?token=secret"), Cycle: 1,
		AcceptedAt: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC),
		Settings:   delivery.Settings{Schedule: []time.Duration{0, 30 * time.Second}, Deadline: time.Hour},
	}
	require.Equal(t, "payment.succeeded → api.acme.com · app acme", DeliverySummary(in))
	details := DeliveryDetails(in)
	require.Contains(t, details, "**Schedule** 0s, 30s (2 attempts)")
	require.Contains(t, details, "**Deadline** 1h0m0s (until 2026-12-02T05:00:00Z)")
	require.Contains(t, details, "**Request timeout** 10s")
	require.NotContains(t, details, "secret", "a URL's path and query stay out of Temporal")

	require.Equal(t, "POST api.acme.com (attempt 3)", sendSummary(in, 1, 3))
	require.Equal(t, "POST api.acme.com (attempt 1, cycle 2)", sendSummary(in, 2, 1))
	require.Equal(t, "attempt 3: POST api.acme.com → 503 in 212 ms (retryable): HTTP 503",
		resultLine("api.acme.com", 3, attempt.SendResult{StatusCode: 503, DurationMS: 212, Class: delivery.ClassRetryable, Error: "HTTP 503"}, nil))
	require.Equal(t, "attempt 1: POST api.acme.com → 204 in 5 ms (success)",
		resultLine("api.acme.com", 1, attempt.SendResult{StatusCode: 204, DurationMS: 5, Class: delivery.ClassSuccess}, nil))
	require.Equal(t, "attempt 2: POST h did not complete: worker lost",
		resultLine("h", 2, attempt.SendResult{}, errors.New("worker lost")))
	require.Equal(t, "endpoint busy: attempt 2 again in 1.02s", heldSummary(delivery.ClassEndpointBusy, 2, 1020*time.Millisecond))
	require.Equal(t, "carrier: 2 first attempts", CarrierSummary(CarrierInput{Deliveries: []Input{in, in}}))

	// Inputs recorded before names were carried show IDs.
	old := in
	old.EndpointHost, old.AppName = "", ""
	require.Equal(t, "payment.succeeded → ep_1 · app app_1", DeliverySummary(old))

	// Customer text cannot open a link or span lines.
	hostile := in
	hostile.AppName = "[click](https://evil.example)\n<b>x</b>" + strings.Repeat("a", 200)
	s := DeliverySummary(hostile)
	require.NotContains(t, s, "\n")
	require.Contains(t, s, `\[click\](https://evil.example) \<b\>x\</b\>`)
	require.Less(t, len([]rune(s)), 160)

	// Within Temporal's 400-byte summary limit, however wide the text.
	wide := in
	wide.AppName, wide.EventType, wide.EndpointHost = strings.Repeat("é", 200), strings.Repeat("事", 200), strings.Repeat("ü", 200)
	s = DeliverySummary(wide)
	require.LessOrEqual(t, len(s), summaryBytesMax)
	require.True(t, utf8.ValidString(s))
	require.LessOrEqual(t, len(markSummary(delivery.StatusDeadLettered, strings.Repeat("x", 2000))), summaryBytesMax)
}

// TestRecordedInputDecodes: an input recorded before durations were
// strings (numbers of nanoseconds, no names) still decodes.
func TestRecordedInputDecodes(t *testing.T) {
	t.Parallel()
	var in Input
	require.NoError(t, json.Unmarshal([]byte(`{"DeliveryID":"dlv_1","EventType":"p.limited","EndpointID":"ep_1",`+
		`"Settings":{"Schedule":[0,1000000000],"Deadline":4500000000000,"RequestTimeout":10000000000,"Retention":0},"Cycle":1}`), &in))
	require.Equal(t, delivery.Settings{Schedule: []time.Duration{0, time.Second}, Deadline: 75 * time.Minute, RequestTimeout: 10 * time.Second}, in.Settings)
	var sig ReplaySignal
	require.NoError(t, json.Unmarshal([]byte(`{"By":"api","ReplayID":7,"Settings":{"Schedule":null,"Deadline":60000000000,"RequestTimeout":0,"Retention":0}}`), &sig))
	require.Equal(t, time.Minute, sig.Settings.Deadline)
	out, err := json.Marshal(in)
	require.NoError(t, err)
	require.Contains(t, string(out), `"Settings":{"Schedule":["0s","1s"],"Deadline":"1h15m0s","RequestTimeout":"10s","Retention":"0s"}`)
}
