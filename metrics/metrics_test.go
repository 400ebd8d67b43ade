package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"hookrelay/metrics"
)

// TestEndpointSeriesAreOptIn: without the opt-in no series carries an
// endpoint ID; with it, attempts are counted per endpoint and class, and
// filter errors per endpoint.
func TestEndpointSeriesAreOptIn(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		s := metrics.NewSender(reg, optIn)
		s.Attempt("ep_a", "success", 200, time.Millisecond, true, time.Now())
		s.Attempt("ep_a", "retryable", 502, time.Millisecond, false, time.Time{})
		s.Attempt("ep_b", "success", 204, time.Millisecond, true, time.Now())
		s.FilterError("ep_c")
		families, err := reg.Gather()
		require.NoError(t, err)
		perEndpoint := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "endpoint_id" {
						require.Contains(t, []string{"hookrelay_endpoint_attempts_total", "hookrelay_endpoint_filter_errors_total"}, f.GetName())
						perEndpoint[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
		if !optIn {
			require.Empty(t, perEndpoint, "no endpoint label unless opted in")
			continue
		}
		require.Equal(t, map[string]float64{"ep_a": 2, "ep_b": 1, "ep_c": 1}, perEndpoint)
	}
}
