package integration

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/grpc"

	"hookrelay/delivery"
	"hookrelay/internal/tracing"
)

// collector is an in-process OTLP/gRPC trace collector that keeps every
// span it is sent.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []span
	srv   *grpc.Server
	addr  string
}

// span is what the test reads of an exported span.
type span struct {
	Name, TraceID, SpanID, ParentID string
	// Attrs are its attributes' and its events' attributes' values.
	Attrs map[string]string
}

func newCollector(t *testing.T) *collector {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &collector{srv: grpc.NewServer(), addr: l.Addr().String()}
	coltracepb.RegisterTraceServiceServer(c.srv, c)
	go func() { _ = c.srv.Serve(l) }()
	t.Cleanup(c.srv.Stop)
	return c
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := span{Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()), Attrs: map[string]string{}}
				add := func(prefix string, kvs []*commonpb.KeyValue) {
					for _, kv := range kvs {
						sp.Attrs[prefix+kv.GetKey()] = anyValue(kv.GetValue())
					}
				}
				add("", s.GetAttributes())
				for _, ev := range s.GetEvents() {
					add("event:"+ev.GetName()+":", ev.GetAttributes())
				}
				add("status:", []*commonpb.KeyValue{{Key: "message", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s.GetStatus().GetMessage()}}}})
				c.spans = append(c.spans, sp)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func anyValue(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	default:
		return v.String()
	}
}

func (c *collector) all() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]span(nil), c.spans...)
}

// TestOneTracePerEvent: with tracing on (the standard OTEL_* variables
// pointing at an in-process OTLP collector), one event the producer sent
// with its own traceparent, fanned out to two endpoints (one failing once),
// is one trace: the ingest request, both dispatches from the outbox (in
// the worker process), the failed delivery's DeliveryWorkflow and every
// attempt; each receiver saw a traceparent of that trace; no attribute
// holds a secret, a signature or the payload.
func TestOneTracePerEvent(t *testing.T) {
	col := newCollector(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+col.addr)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	h := newHarness(t)
	require.NotNil(t, h.api.Tracing)
	require.NotNil(t, h.worker.Tracing)

	steady := newReceiver(t, nil)
	flaky := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	appID := h.createApp()
	schedule := []string{"0s", "1s", "1s"}
	e1 := h.createEndpoint(appID, map[string]any{"url": steady.URL(), "event_types": []string{"order.shipped"}, "retry_schedule": schedule})
	e2 := h.createEndpoint(appID, map[string]any{"url": flaky.URL(), "event_types": []string{"order.shipped"}, "retry_schedule": schedule})
	steady.setSecrets(e1.Secret)
	flaky.setSecrets(e2.Secret)

	// The producer's own trace.
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	marker := "parcel-7f3a9c-do-not-trace"
	body := []byte(`{"type":"order.shipped","data":{"note":"` + marker + `"}}`)
	req, err := http.NewRequest(http.MethodPost, h.url+"/v1/apps/"+appID+"/events", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.adminKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var ev eventResp
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ev))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Len(t, ev.Deliveries, 2)
	var flakyDlv string
	for _, d := range ev.Deliveries {
		h.waitDelivery(appID, d.ID, 30*time.Second, delivery.StatusSucceeded)
		if d.EndpointID == e2.ID {
			flakyDlv = d.ID
		}
	}
	require.Len(t, steady.receipts(), 1)
	require.Len(t, flaky.receipts(), 2)

	// Every span of the event's trace, once exported.
	var spans []span
	count := func(name string) int {
		n := 0
		for _, s := range spans {
			if s.Name == name {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool {
		spans = nil
		for _, s := range col.all() {
			if s.TraceID == traceID {
				spans = append(spans, s)
			}
		}
		sawWorkflow := false
		for _, s := range spans {
			if s.Name == "RunWorkflow:DeliveryWorkflow" && s.Attrs["temporalWorkflowID"] == flakyDlv {
				sawWorkflow = true // the failed delivery's workflow is in the trace
			}
		}
		// A dispatch span per start tried: one per delivery, and one more
		// for a start Temporal refused and the dispatcher tried again.
		return count(tracing.SpanIngest) == 1 && count(tracing.SpanDispatch) >= 2 && count(tracing.SpanAttempt) == 3 &&
			sawWorkflow && count("RunActivity:SendSigned") >= 1
	}, 20*time.Second, 50*time.Millisecond, "spans of the trace: %v", names(col.all()))

	attempts := map[string][]string{}
	for _, s := range spans {
		if s.Name == tracing.SpanAttempt {
			attempts[s.Attrs["hookrelay.delivery.id"]] = append(attempts[s.Attrs["hookrelay.delivery.id"]], s.Attrs["http.response.status_code"])
		}
	}
	require.ElementsMatch(t, []string{"500", "200"}, attempts[flakyDlv])

	// Each receiver's requests carried a traceparent of the trace, naming
	// an attempt span as parent.
	attemptIDs := map[string]bool{}
	for _, s := range spans {
		if s.Name == tracing.SpanAttempt {
			attemptIDs[s.SpanID] = true
		}
	}
	var signatures []string
	for _, rc := range []*probe{steady, flaky} {
		for _, r := range rc.receipts() {
			tp := strings.Split(r.Header.Get("traceparent"), "-")
			require.Len(t, tp, 4, r.Header.Get("traceparent"))
			require.Equal(t, traceID, tp[1])
			require.True(t, attemptIDs[tp[2]], "the request's parent is its attempt's span")
			require.True(t, r.StdValid, "traceparent does not disturb the signature")
			signatures = append(signatures, strings.Fields(r.Header.Get("webhook-signature"))...)
			signatures = append(signatures, r.Header.Get("X-Webhook-Signature"))
		}
	}

	// No attribute of any span (of every trace) holds a secret, a
	// signature or the payload.
	forbidden := []string{e1.Secret, e2.Secret, strings.TrimPrefix(e1.Secret, "whsec_"), strings.TrimPrefix(e2.Secret, "whsec_"), marker}
	for _, sig := range signatures {
		if _, v, ok := strings.Cut(sig, ","); ok {
			forbidden = append(forbidden, v)
		} else if sig != "" {
			forbidden = append(forbidden, sig)
		}
	}
	for _, s := range col.all() {
		for k, v := range s.Attrs {
			for _, f := range forbidden {
				require.False(t, strings.Contains(v, f), "span %s attribute %s holds a secret, signature or the payload", s.Name, k)
			}
		}
	}
}

func names(spans []span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name+"@"+s.TraceID[:8])
	}
	return out
}
