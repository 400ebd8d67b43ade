// Package temporaltrace is Temporal's OpenTelemetry interceptor on
// hookrelay's tracing. It is apart from package tracing so the API, which
// traces ingest, links no Temporal code (delivery's TestLayering).
package temporaltrace

import (
	"fmt"

	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"hookrelay/internal/tracing"
)

// Interceptor is Temporal's OpenTelemetry interceptor on t's tracer
// provider (client and worker: workflow starts carry the span in their
// headers, so the workflow's and its activities' spans join the trace);
// nil when t is off.
func Interceptor(t *tracing.Tracing) (interceptor.Interceptor, error) {
	if t == nil {
		return nil, nil
	}
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: t.Provider().Tracer("temporal-sdk-go"), TextMapPropagator: t.Propagator(),
		// Baggage is not hookrelay's to carry between tenants' events.
		DisableBaggage: true, DisableQueryTracing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	return i, nil
}
