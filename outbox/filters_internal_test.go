package outbox

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOnlySubscribedEndpointsFiltersRun: an event's filters run only for
// the endpoints subscribed to its type; another endpoint's filter (one that
// would fail on this payload) is not evaluated, and said so.
func TestOnlySubscribedEndpointsFiltersRun(t *testing.T) {
	t.Parallel()
	p := NewPublisher()
	fs := []endpointFilter{
		{id: "ep_invoices", expr: "data.x.y == 1", types: []string{"invoice.paid"}},
		{id: "ep_all", expr: "data.x.y == 1"},
		{id: "ep_orders", expr: "true", types: []string{"invoice.paid", "order.created"}},
	}
	v, err := p.verdicts(fs, Event{Type: "order.created", Data: json.RawMessage(`{}`)}, time.Now())
	require.NoError(t, err)
	require.Equal(t, []bool{false, true, true}, v.evaluated)
	require.Empty(t, v.errs[0], "not run")
	require.NotEmpty(t, v.errs[1], "run: data.x does not exist")
	require.Equal(t, []bool{false, false, true}, v.matched)
}
