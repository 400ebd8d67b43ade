package tracing

import "go.opentelemetry.io/otel/attribute"

// The attribute keys of hookrelay's spans: identifiers and outcomes only.
// No attribute ever holds a secret, a signature, a header value or a
// payload; Allowed is the whole list (tests check spans against it).
const (
	KeyApp        = attribute.Key("hookrelay.app.id")
	KeyEndpoint   = attribute.Key("hookrelay.endpoint.id")
	KeyEventType  = attribute.Key("hookrelay.event.type")
	KeyEvent      = attribute.Key("hookrelay.event.id")
	KeyDelivery   = attribute.Key("hookrelay.delivery.id")
	KeyDeliveries = attribute.Key("hookrelay.deliveries")
	KeyCycle      = attribute.Key("hookrelay.cycle")
	KeyAttempt    = attribute.Key("hookrelay.attempt")
	KeyClass      = attribute.Key("hookrelay.class")
	KeyStatusCode = attribute.Key("http.response.status_code")
	// KeyReceiverTraceID is the trace ID a receiver was sent instead of
	// the event's (delivery.TraceFresh).
	KeyReceiverTraceID = attribute.Key("hookrelay.receiver_trace_id")
)

// Allowed are the attribute keys hookrelay sets, with the Temporal
// interceptor's (workflow, run and activity IDs: a delivery's workflow ID
// is its delivery ID).
var Allowed = map[attribute.Key]bool{
	KeyApp: true, KeyEndpoint: true, KeyEventType: true, KeyEvent: true, KeyDelivery: true, KeyDeliveries: true,
	KeyCycle: true, KeyAttempt: true, KeyClass: true, KeyStatusCode: true, KeyReceiverTraceID: true,
	"temporalWorkflowID": true, "temporalRunID": true, "temporalActivityID": true, "temporalUpdateID": true,
}

// ReceiverTraceID is the trace ID a receiver was sent instead of the
// event's.
func ReceiverTraceID(id string) attribute.KeyValue { return KeyReceiverTraceID.String(id) }

// App names an app.
func App(id string) attribute.KeyValue { return KeyApp.String(id) }

// Endpoint names an endpoint.
func Endpoint(id string) attribute.KeyValue { return KeyEndpoint.String(id) }

// EventType names an event's type.
func EventType(name string) attribute.KeyValue { return KeyEventType.String(name) }

// Event names an event.
func Event(id string) attribute.KeyValue { return KeyEvent.String(id) }

// Delivery names a delivery.
func Delivery(id string) attribute.KeyValue { return KeyDelivery.String(id) }

// Deliveries counts the deliveries an event was fanned out to.
func Deliveries(n int) attribute.KeyValue { return KeyDeliveries.Int(n) }

// Cycle is a delivery's cycle (1, then one more per replay).
func Cycle(n int) attribute.KeyValue { return KeyCycle.Int(n) }

// Attempt is an attempt's number within its cycle.
func Attempt(n int) attribute.KeyValue { return KeyAttempt.Int(n) }

// Class is an attempt's outcome class (success, retryable, …).
func Class(c string) attribute.KeyValue { return KeyClass.String(c) }

// StatusCode is an HTTP response's status code.
func StatusCode(code int) attribute.KeyValue { return KeyStatusCode.Int(code) }
