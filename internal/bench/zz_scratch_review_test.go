package bench

// SCRATCH (review): delete before finishing.

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestScratchNoisyTableAndJSON(t *testing.T) {
	phase := func(p99 float64) NoisyPhase {
		return NoisyPhase{LatenessMS: Latency{P99: p99}, Delivered: 10, Sent: 10, CPUSeconds: 3}
	}
	one := withRatios([]NoisyPhase{phase(0), phase(6), phase(10)})
	two := withRatios([]NoisyPhase{phase(8), phase(6), phase(12)})
	pooled := withRatios([]NoisyPhase{phase(5), phase(6), phase(11)})
	rep := &NoisyReport{Phases: pooled, Rounds: [][]NoisyPhase{one, two}}
	var out bytes.Buffer
	rep.WriteTable(&out)
	t.Logf("table:\n%s", out.String())
	raw, _ := json.Marshal(rep)
	t.Logf("json: %s", raw)
	// pooled p99 vs per-round p99s: pooling samples
	a := make([]float64, 0, 200)
	b := make([]float64, 0, 200)
	for i := range 100 {
		a = append(a, float64(i))
		b = append(b, float64(i)*2)
	}
	t.Logf("p99 round1 %.1f round2 %.1f pooled %.1f", summarize(a).P99, summarize(b).P99, summarize(append(append([]float64{}, a...), b...)).P99)
}
