package delivery_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"hookrelay/delivery"
)

// TestTransitionTable walks every status (and no row) against every event:
// the table is the issue's, written out here once more so a change to it
// is a change to this test too.
func TestTransitionTable(t *testing.T) {
	const (
		gone, pending, delivering = delivery.StatusGone, delivery.StatusPending, delivery.StatusDelivering
		succeeded, dead, canceled = delivery.StatusSucceeded, delivery.StatusDeadLettered, delivery.StatusCanceled
	)
	inFlight := map[delivery.Status]bool{pending: true, delivering: true}
	finished := map[delivery.Status]bool{succeeded: true, dead: true, canceled: true}
	want := map[delivery.Event]struct {
		from map[delivery.Status]bool
		to   delivery.Status
	}{
		delivery.EventAccept:     {map[delivery.Status]bool{gone: true}, pending},
		delivery.EventClaim:      {inFlight, delivering},
		delivery.EventStart:      {inFlight, delivering},
		delivery.EventRecord:     {inFlight, delivering},
		delivery.EventSucceed:    {inFlight, succeeded},
		delivery.EventDeadLetter: {inFlight, dead},
		delivery.EventCancel:     {inFlight, canceled},
		delivery.EventReplay:     {finished, pending},
		delivery.EventPrune:      {finished, gone},
	}
	require.Len(t, delivery.Events(), len(want))
	for _, ev := range delivery.Events() {
		w, ok := want[ev]
		require.True(t, ok, ev)
		for _, from := range append(delivery.Statuses(), gone) {
			to, err := delivery.Transition(from, ev)
			if w.from[from] {
				require.NoError(t, err, "%s from %q", ev, from)
				require.Equal(t, w.to, to, "%s from %q", ev, from)
				continue
			}
			te, ok := errors.AsType[*delivery.TransitionError](err)
			require.True(t, ok, "%s from %q is refused with a *TransitionError: %v", ev, from, err)
			require.Equal(t, from, te.From)
			require.Equal(t, ev, te.Event)
			require.Equal(t, from, to, "a refused event leaves the status")
		}
	}
	// A final status never changes but by a replay (or a prune).
	for _, from := range []delivery.Status{succeeded, dead, canceled} {
		for _, to := range delivery.Statuses() {
			require.Equal(t, to == from || to == pending, delivery.Allowed(from, to), "%s -> %s", from, to)
		}
	}
}

// TestDatabaseHoldsTheSameTable: the trigger of migration 016 allows
// exactly the changes of status the table allows.
func TestDatabaseHoldsTheSameTable(t *testing.T) {
	raw, err := os.ReadFile("../migrations/016_status_transitions.sql")
	require.NoError(t, err)
	var inSQL [][2]string
	for _, m := range regexp.MustCompile(`\('(\w+)', '(\w+)'\)`).FindAllStringSubmatch(string(raw), -1) {
		inSQL = append(inSQL, [2]string{m[1], m[2]})
	}
	var inGo [][2]string
	for _, from := range delivery.Statuses() {
		for _, to := range delivery.Statuses() {
			if from != to && delivery.Allowed(from, to) {
				inGo = append(inGo, [2]string{string(from), string(to)})
			}
		}
	}
	byPair := func(a, b [2]string) int { return slices.Compare(a[:], b[:]) }
	slices.SortFunc(inSQL, byPair)
	slices.SortFunc(inGo, byPair)
	require.Equal(t, inGo, inSQL)
}
