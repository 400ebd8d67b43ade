package portal

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"hookrelay/outbox"
)

// TestPrettyEnvelopeShowsTheCreatedSent: the portal's frozen event shows
// created as the envelope sent and signed it, with milliseconds.
func TestPrettyEnvelopeShowsTheCreatedSent(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 12, 1, 10, 0, 0, 870e6, time.UTC)
	out := prettyEnvelope(outbox.Published{ID: "evt_1", Type: "order.paid", Created: created, APIVersion: "2026-11-01", Data: json.RawMessage(`{}`)})
	require.True(t, strings.Contains(out, `"created": "`+created.Format(outbox.CreatedFormat)+`"`), out)
}
