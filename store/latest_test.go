package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/outbox"
)

// TestLatestEventsReadsABoundedNumberOfBytes: a filter test over the last
// 1,000 events of an app whose events are 200 KiB each reads payloads only
// up to its byte bound (at least one event), newest first, and says that
// older ones were left out.
func TestLatestEventsReadsABoundedNumberOfBytes(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	big := strings.Repeat("x", 200<<10)
	for i := range 8 {
		_, err := outbox.PublishNow(ctx, f.st.Pool(), f.app.ID, outbox.Event{Type: "order.paid",
			Data: json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, big))})
		require.NoError(t, err)
	}
	evs, more, err := f.st.LatestEvents(ctx, f.app.ID, outbox.TestType, 1000, nil, 1<<20)
	require.NoError(t, err)
	require.True(t, more, "%d events read", len(evs))
	require.Equal(t, 5, len(evs), "five 200 KiB events fit in 1 MiB, six do not")
	for i, e := range evs {
		require.True(t, strings.Contains(string(e.Payload), fmt.Sprintf(`"n":%d`, 7-i)), "newest first")
	}
	evs, more, err = f.st.LatestEvents(ctx, f.app.ID, outbox.TestType, 1000, nil, 1)
	require.NoError(t, err)
	require.True(t, more)
	require.Len(t, evs, 1, "at least one")
	evs, more, err = f.st.LatestEvents(ctx, f.app.ID, outbox.TestType, 3, nil, 16<<20)
	require.NoError(t, err)
	require.False(t, more, "the last 3 fit")
	require.Len(t, evs, 3)
}
