package bench

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/filter"
	"hookrelay/internal/pgcluster"
)

// The measurement's premise: every endpoint's filter compiles and accepts
// every event the measurement sends, so both apps write the same
// deliveries.
func TestFiltersAcceptEveryBenchEvent(t *testing.T) {
	fs, err := filter.New()
	require.NoError(t, err)
	for i := range 20 {
		p, err := fs.Program(filterFor(i))
		require.NoError(t, err)
		for j := range 50 {
			data, err := json.Marshal(filterEvent(j))
			require.NoError(t, err)
			in, err := filter.NewInput(filter.Event{Type: "invoice.paid", Data: data})
			require.NoError(t, err)
			ok, err := p.Match(in)
			require.NoError(t, err)
			require.True(t, ok, "filter %d on event %d", i, j)
		}
	}
}

// TestFiltersSmoke runs a short --filters measurement end to end: every
// event of both shapes is accepted. It checks no speed.
func TestFiltersSmoke(t *testing.T) {
	if _, err := pgcluster.FindBinDir(); err != nil {
		t.Skip(err)
	}
	rep, err := RunFilters(context.Background(), Options{Events: 40, Rate: 200, Concurrency: 4, TemporalSQLite: true}, 3)
	require.NoError(t, err)
	require.Len(t, rep.Shapes, 2)
	for _, s := range rep.Shapes {
		require.Equal(t, 40, s.Accepted, s.Name)
		require.Positive(t, s.CPUMSPerEvent, s.Name)
	}
}
