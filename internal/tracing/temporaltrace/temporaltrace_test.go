package temporaltrace_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"hookrelay/internal/tracing"
	"hookrelay/internal/tracing/temporaltrace"
)

// Off, Temporal gets no interceptor; on, one.
func TestInterceptor(t *testing.T) {
	i, err := temporaltrace.Interceptor(nil)
	require.NoError(t, err)
	require.Nil(t, i)
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	i, err = temporaltrace.Interceptor(tracing.New(tp))
	require.NoError(t, err)
	require.NotNil(t, i)
}
