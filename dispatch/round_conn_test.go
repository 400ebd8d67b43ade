package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"hookrelay/internal/testenv"
)

// TestRoundGivesItsConnectionBackAtCommit: once a round committed, its
// connection is back in the pool before the round's post-commit work
// (carrier starts, DoneCarriers, sequencer wakes), which takes
// connections of its own and calls Temporal. On a pool of one connection
// the carriers' DoneCarriers must not wait for the round's own connection
// (review finding: store.Round held it until dispatch returned, where
// pgxpool.Tx gave it back at Commit).
func TestRoundGivesItsConnectionBackAtCommit(t *testing.T) {
	t.Parallel()
	f := newRound(t)
	_, _ = f.app(t, "carried", 3)
	f.d.Pool = testenv.PoolLike(t, f.st.Pool(), func(c *pgxpool.Config) { c.MaxConns = 1 })
	f.d.SetCarrierSize(10) // the three fresh rows go to one carrier
	// A guard, not a measure: a round that waits for its own connection
	// fails when it ends.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := f.d.dispatch(ctx, 10)
	require.NoError(t, err, "the carriers' rows were deleted on the round's own pool")
	require.Equal(t, 3, n)
	require.Len(t, f.fc.starts, 1, "one carrier")
	require.Zero(t, f.outboxRows(t))
}
