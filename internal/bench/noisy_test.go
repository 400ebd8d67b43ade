package bench

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoisyRatiosAreOverTheirOwnAlonePhase: each round's ratios divide by
// that round's alone phase, the pooled ones by the pooled alone phase, and
// the table prints both.
func TestNoisyRatiosAreOverTheirOwnAlonePhase(t *testing.T) {
	phase := func(p99 float64) NoisyPhase { return NoisyPhase{LatenessMS: Latency{P99: p99}} }
	one := withRatios([]NoisyPhase{phase(4), phase(6), phase(10)})
	two := withRatios([]NoisyPhase{phase(8), phase(6), phase(12)})
	require.Zero(t, one[0].RatioP99, "the alone phase has no ratio")
	require.InDelta(t, 1.5, one[1].RatioP99, 1e-9)
	require.InDelta(t, 2.5, one[2].RatioP99, 1e-9)
	require.InDelta(t, 0.75, two[1].RatioP99, 1e-9)
	require.InDelta(t, 1.5, two[2].RatioP99, 1e-9)
	require.Zero(t, withRatios([]NoisyPhase{phase(0), phase(5)})[1].RatioP99, "no ratio over an empty alone phase")

	pooled := withRatios([]NoisyPhase{phase(5), phase(6), phase(11)})
	var out bytes.Buffer
	(&NoisyReport{Phases: pooled, Rounds: [][]NoisyPhase{one, two}}).WriteTable(&out)
	require.Contains(t, out.String(), "run 2 times in turn")
	require.Contains(t, out.String(), "× 2.20")
	require.Contains(t, out.String(), "round 1: B's p99 4.0 ms, 6.0 ms (× 1.50), 10.0 ms (× 2.50)\n")
	require.Contains(t, out.String(), "round 2: B's p99 8.0 ms, 6.0 ms (× 0.75), 12.0 ms (× 1.50)\n")

	out.Reset()
	(&NoisyReport{Phases: pooled, Rounds: [][]NoisyPhase{one, withRatios([]NoisyPhase{phase(0), phase(5), phase(6)})}}).WriteTable(&out)
	require.Contains(t, out.String(), "round 2: B's p99 0.0 ms, 5.0 ms (—), 6.0 ms (—)\n", "no ratio over an empty alone phase")

	out.Reset()
	(&NoisyReport{Phases: pooled}).WriteTable(&out)
	require.NotContains(t, out.String(), "round")
}

// TestNoisyPhasesPoolTheirRounds: a pooled phase counts every round's
// deliveries, events, CPU and holds.
func TestNoisyPhasesPoolTheirRounds(t *testing.T) {
	var pooled NoisyPhase
	pooled.add(NoisyPhase{Name: "B alone", Delivered: 1600, Sent: 1600, CPUSeconds: 7.5, Held: 2})
	pooled.add(NoisyPhase{Name: "B alone", Delivered: 1599, Sent: 1600, CPUSeconds: 8.25, Held: 3})
	require.Equal(t, NoisyPhase{Name: "B alone", Delivered: 3199, Sent: 3200, CPUSeconds: 15.75, Held: 5}, pooled)
}

// TestQuietARunsBAloneInEveryPhase: an A/A run (Options.QuietA) sends to
// no A app in any phase and says so in its phases' names; a noisy run
// sends to the slow A, then the silent one.
func TestQuietARunsBAloneInEveryPhase(t *testing.T) {
	as := tenants{slow: "app_slow", silent: "app_silent"}
	require.Equal(t, []string{"", "", ""}, as.beside(true))
	require.Equal(t, "B alone again (A quiet)", phaseNames(Options{QuietA: true})[1])
	require.Equal(t, []string{"", "app_slow", "app_silent"}, as.beside(false))
	require.Len(t, phaseNames(Options{}), 3)
	require.Equal(t, "B beside A never answering (10 s timeout)", phaseNames(Options{})[2])

	ordered := tenants{ordered: "app_ordered"}
	require.Equal(t, []string{"", "app_ordered"}, ordered.beside(false), "B alone, then beside the ordered A")
	require.Equal(t, []string{"B alone", "B beside A's 10000 ordering keys draining"}, phaseNames(Options{OrderedA: 10000}))

	var out bytes.Buffer
	(&NoisyReport{RateB: 80, QuietA: true}).WriteTable(&out)
	require.Contains(t, out.String(), "app A quiet (its apps made, nothing sent: an A/A run)")
	out.Reset()
	(&NoisyReport{RateB: 80, RateA: 40}).WriteTable(&out)
	require.Contains(t, out.String(), "app A at 40 events/s")
	out.Reset()
	(&NoisyReport{RateB: 20, OrderedKeys: 10000, Phases: []NoisyPhase{{Name: "B alone"}, {Name: "beside", ADelivered: 9000}}}).WriteTable(&out)
	require.Contains(t, out.String(), "app A with 10000 ordering keys on a fifo endpoint")
	require.Contains(t, out.String(), "A's keys delivered by the phase's end (its rounds summed): 9000")
}
