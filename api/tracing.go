package api

import (
	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"

	"hookrelay/internal/tracing"
	"hookrelay/outbox"
)

// traceIngest starts an ingest request's span, continuing the traceparent
// the producer sent, and puts it in the request's context: Publish stores
// it with the event, so the whole delivery joins this trace. The returned
// func ends it with what was published (pub nil: nothing was). Off, it
// does nothing.
func (s *Server) traceIngest(c *gin.Context) (end func(pub *outbox.Published)) {
	if s.tracing == nil {
		return func(*outbox.Published) {}
	}
	ctx := s.tracing.Extract(c.Request.Context(), c.Request.Header)
	ctx, span := s.tracing.Start(ctx, tracing.SpanIngest, trace.SpanKindServer, tracing.App(c.Param("app")))
	c.Request = c.Request.WithContext(ctx)
	return func(pub *outbox.Published) {
		if pub != nil && pub.ID != "" {
			span.SetAttributes(tracing.EventType(pub.Type), tracing.Event(pub.ID), tracing.Deliveries(len(pub.Deliveries)))
		}
		span.SetAttributes(tracing.StatusCode(c.Writer.Status()))
		span.End()
	}
}
