package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"hookrelay/access"
	"hookrelay/delivery"
	"hookrelay/filter"
	"hookrelay/service"
	"hookrelay/signing"
)

// obj and friends keep the OpenAPI document below readable.
type obj = map[string]any

func ref(name string) obj { return obj{"$ref": "#/components/schemas/" + name} }

func arr(items obj) obj { return obj{"type": "array", "items": items} }

func str(desc string) obj { return obj{"type": "string", "description": desc} }

func nullable(t string) obj { return obj{"type": []string{t, "null"}} }

func listOf(name string) obj {
	return obj{"type": "object", "properties": obj{"data": arr(ref(name)), "next_cursor": nullable("string")}}
}

// operation describes one route: its OpenAPI description and its handler.
type operation struct {
	method, path, summary string
	request               obj // request body schema, nil for none
	status                int
	response              obj
	query                 []string
	handle                func(*Server, *gin.Context)
}

// operations is the API surface, each route declared once: Handler
// registers these routes with their handlers, and the OpenAPI document is
// made of the same list.
func operations() []operation {
	return []operation{
		{"POST", "/v1/apps", "Create an app", ref("AppRequest"), 201, ref("App"), nil, (*Server).createApp},
		{"GET", "/v1/apps", "List apps", nil, 200, listOf("App"), []string{"limit", "cursor"}, (*Server).listApps},
		{"GET", "/v1/apps/{app}", "Get an app", nil, 200, ref("App"), nil, (*Server).getApp},
		{"PATCH", "/v1/apps/{app}", "Change an app's name or retention", ref("AppRequest"), 200, ref("App"), nil, (*Server).patchApp},
		{"DELETE", "/v1/apps/{app}", "Delete an app and everything it owns", nil, 204, nil, nil, (*Server).deleteApp},
		{"POST", "/v1/event-types", "Add an event type to the operator's catalog, which every app sees", ref("EventTypeRequest"), 201, ref("EventType"), nil, (*Server).createEventType},
		{"GET", "/v1/event-types", "List every event type: the operator's and those any app's events used", nil, 200, listOf("EventType"), []string{"limit", "cursor"}, (*Server).listEventTypes},
		{"GET", "/v1/event-types/{name}", "Get an event type", nil, 200, ref("EventType"), nil, (*Server).getEventType},
		{"PATCH", "/v1/event-types/{name}", "Describe an event type; it joins the operator's catalog", ref("EventTypeRequest"), 200, ref("EventType"), nil, (*Server).patchEventType},
		{"POST", "/v1/apps/{app}/endpoints", "Create an endpoint (the secret is returned once)", ref("EndpointRequest"), 201, ref("EndpointWithSecret"), nil, (*Server).createEndpoint},
		{"GET", "/v1/apps/{app}/endpoints", "List endpoints", nil, 200, listOf("Endpoint"), []string{"limit", "cursor"}, (*Server).listEndpoints},
		{"GET", "/v1/apps/{app}/endpoints/{ep}", "Get an endpoint", nil, 200, ref("Endpoint"), nil, (*Server).getEndpoint},
		{"PATCH", "/v1/apps/{app}/endpoints/{ep}", "Update an endpoint", ref("EndpointRequest"), 200, ref("Endpoint"), nil, (*Server).patchEndpoint},
		{"DELETE", "/v1/apps/{app}/endpoints/{ep}", "Delete an endpoint; its open deliveries are canceled", nil, 204, nil, nil, (*Server).deleteEndpoint},
		{"POST", "/v1/apps/{app}/endpoints/{ep}/secret/rotate", "Rotate the signing secret", obj{"type": "object", "properties": obj{"grace_period": str("Go duration, 0s–168h, default 24h")}}, 200,
			obj{"type": "object", "properties": obj{"secret": str("whsec_…, shown once (hmac-sha256)"), "public_key": str("whpk_… (ed25519)"), "previous_valid_until": obj{"type": "string", "format": "date-time"}}}, nil, (*Server).rotateSecret},
		{"POST", "/v1/apps/{app}/endpoints/{ep}/filter-test", "Evaluate a filter (the endpoint's own unless the body gives one) on the app's latest events, as fan-out would", ref("FilterTestRequest"), 200, ref("FilterTest"), nil, (*Server).testEndpointFilter},
		{"POST", "/v1/apps/{app}/filter-test", "Evaluate a filter on the app's latest events, as fan-out would for an endpoint with these event types", ref("FilterTestRequest"), 200, ref("FilterTest"), nil, (*Server).testAppFilter},
		{"POST", "/v1/apps/{app}/endpoints/{ep}/secret/revoke-previous", "Stop the previous secret now", nil, 200, obj{"type": "object", "properties": obj{"revoked": obj{"type": "integer"}}}, nil, (*Server).revokePrevious},
		{"POST", "/v1/apps/{app}/endpoints/{ep}/replay", "Replay the endpoint's dead letters created in a time range", ref("ReplayRange"), 202, ref("Replayed"), nil, (*Server).replayEndpoint},
		{"POST", "/v1/apps/{app}/events", "Publish an event (202; 200 on an idempotent repeat)", ref("EventRequest"), 202, ref("Event"), nil, (*Server).createEvent},
		{"GET", "/v1/apps/{app}/events", "List events", nil, 200, listOf("Event"), []string{"type", "since", "until", "limit", "cursor"}, (*Server).listEvents},
		{"GET", "/v1/apps/{app}/events/{evt}", "Get an event with its deliveries", nil, 200, ref("Event"), nil, (*Server).getEvent},
		{"GET", "/v1/apps/{app}/deliveries", "List deliveries", nil, 200, listOf("Delivery"), []string{"status", "endpoint_id", "event_id", "event_type", "since", "until", "limit", "cursor"}, (*Server).listDeliveries},
		{"GET", "/v1/apps/{app}/deliveries/{dlv}", "The three questions: state, last failure, next attempt", nil, 200, ref("Delivery"), nil, (*Server).getDelivery},
		{"GET", "/v1/apps/{app}/deliveries/{dlv}/attempts", "Every attempt of a delivery", nil, 200, obj{"type": "object", "properties": obj{"data": arr(ref("Attempt"))}}, nil, (*Server).listAttempts},
		{"POST", "/v1/apps/{app}/deliveries/{dlv}/replay", "Replay one delivery", nil, 202, ref("Replayed"), nil, (*Server).replayDelivery},
		{"POST", "/v1/apps/{app}/deliveries/{dlv}/release", "Release a dead letter that blocks its fifo sequence (fifo_on_dead_letter block): the next delivery is sent; the dead letter stays replayable (409 for any other delivery)", nil, 202, obj{"type": "object", "properties": obj{"released": obj{"type": "integer"}}}, nil, (*Server).releaseDelivery},
		{"GET", "/v1/apps/{app}/stats", "Acceptance figures over the latest events, and deliveries per hour by outcome", nil, 200, ref("Stats"), []string{"last", "endpoint_id"}, (*Server).stats},
		{"POST", "/v1/api-keys", "Create an API key (admin only; the key is returned once)", ref("APIKeyRequest"), 201, ref("APIKeyWithKey"), nil, (*Server).createKey},
		{"GET", "/v1/api-keys", "List API keys (admin only)", nil, 200, listOf("APIKey"), []string{"limit", "cursor"}, (*Server).listKeys},
		{"DELETE", "/v1/api-keys/{key}", "Revoke an API key (admin only): its next request is refused", nil, 204, nil, nil, (*Server).revokeKey},
		{"POST", "/v1/apps/{app}/portal-links", "Make a single-use, expiring link into the app's portal", ref("PortalLinkRequest"), 201, ref("PortalLink"), nil, (*Server).createPortalLink},
		{"GET", "/v1/apps/{app}/audit-log", "Every state-changing call on the app and who made it", nil, 200, listOf("AuditEntry"), []string{"limit", "cursor"}, (*Server).listAudit},
		{"GET", "/v1/apps/{app}/event-types", "The event-type catalog as the app's endpoints can subscribe to it: the operator's types and those the app's own events used, never another app's (operational types only for app_operations)", nil, 200, listOf("EventType"), []string{"limit", "cursor"}, (*Server).listAppEventTypes},
		{"POST", "/v1/apps/{app}/endpoints/{ep}/test", "Send the endpoint a test event (webhook.test), whatever its filter", nil, 202, ref("Event"), nil, (*Server).testEndpoint},
	}
}

func schemas() obj {
	ts := obj{"type": "string", "format": "date-time"}
	durations := obj{"type": "array", "items": str("Go duration"), "example": []string{"1s", "5s", "30s", "2m", "10m", "1h"}}
	endpointProps := obj{
		"url": str("http(s) URL, ≤ 2 KiB; https only outside dev mode"), "description": str(""),
		"event_types": arr(str("resource.action; empty = all")), "environment": obj{"type": "string", "enum": []string{"live", "test"}},
		"disabled":       obj{"type": "boolean", "description": "drops new fan-out and cancels in-flight deliveries"},
		"paused":         obj{"type": "boolean", "description": "keeps deliveries pending and sends nothing until resumed"},
		"retry_schedule": durations, "deadline": str("Go duration, default 75m"),
		"request_timeout":  str("Go duration, default 10s"),
		"headers":          obj{"type": "object", "additionalProperties": obj{"type": "string"}, "description": "sealed at rest; reads show each value as ••••••, and sending •••••• back keeps it"},
		"signature_scheme": obj{"type": "string", "enum": []string{signing.SchemeHMAC, signing.SchemeEd25519}, "description": "fixed at creation; default hmac-sha256"},
		"filter": obj{"type": "string", "maxLength": filter.MaxBytes, "example": "data.amount >= 5000 && data.currency == 'usd'",
			"description": "CEL expression over type, data, created and api_version; \"\" (the default) delivers every subscribed event; an evaluation error is no match"},
		"egress_proxy": str("admin key only (an app key gets 403): \"direct\", an http(s) proxy URL without credentials, or \"\" (the default) for the deployment's --egress-proxy"),
		"ordering": obj{"type": "string", "enum": []string{string(delivery.OrderingNone), string(delivery.OrderingFIFO)},
			"description": "none (the default): every delivery on its own; fifo: the deliveries of one ordering key one at a time, in acceptance order (docs/contract.md#14-ordered-delivery)"},
		"fifo_on_dead_letter": obj{"type": "string", "enum": []string{string(delivery.DeadLetterSkip), string(delivery.DeadLetterBlock)},
			"description": "skip (the default): a fifo sequence moves on when its head dead-letters; block: it waits until the dead letter is replayed and succeeds or is released; applies to events accepted from then on"},
		"trace_context": obj{"type": "string", "enum": []string{"", string(delivery.TraceLinked), string(delivery.TraceFresh), string(delivery.TraceOff)},
			"description": "trace context the receiver is sent while tracing is on: linked (traceparent of the attempt's span in the event's trace), fresh (a new trace each attempt), off; \"\" (absent) follows the deployment's --receiver-traces; tracestate is never sent"},
	}
	endpoint := obj{"type": "object", "properties": merge(endpointProps, obj{"id": str("ep_…"), "disabled_reason": nullable("string"),
		"public_key": str("whpk_…: an ed25519 endpoint's current public key, to verify v1a signatures"), "created_at": ts, "updated_at": ts})}
	attempt := obj{"type": "object", "properties": obj{
		"id": str("atm_…"), "cycle": obj{"type": "integer"}, "number": obj{"type": "integer"}, "started_at": ts,
		"duration_ms": obj{"type": "integer"}, "status_code": nullable("integer"),
		"class": obj{"type": "string", "enum": delivery.Classes()},
		"error": str(""), "response_excerpt": str("first 2 KiB"), "key_ids": arr(str("signing key IDs, never secrets")),
	}}
	return obj{
		"AppRequest": obj{"type": "object", "required": []string{"name"}, "properties": obj{"name": str(""),
			"retention": str(fmt.Sprintf("Go duration from %s to %s overriding the server's retention; \"\" for the server's", service.MinRetention, service.MaxRetention))}},
		"App": obj{"type": "object", "properties": obj{"id": str("app_…"), "name": str(""),
			"retention": str("the app's retention, absent when it keeps the server's"), "created_at": ts, "updated_at": ts}},
		"EventTypeRequest": obj{"type": "object", "properties": obj{"name": str("resource.action"), "description": str(""),
			"schema": obj{"type": "object", "description": "JSON Schema of data"}, "deprecated": obj{"type": "boolean"}}},
		"EventType": obj{"type": "object", "properties": obj{"name": str(""), "description": str(""), "schema": obj{"type": []string{"object", "null"}},
			"deprecated": obj{"type": "boolean"}, "created_at": ts, "updated_at": ts}},
		"EndpointRequest":    obj{"type": "object", "required": []string{"url"}, "properties": endpointProps},
		"Endpoint":           endpoint,
		"EndpointWithSecret": obj{"allOf": []obj{ref("Endpoint"), {"type": "object", "properties": obj{"secret": str("whsec_…, shown once")}}}},
		"EventRequest": obj{"type": "object", "required": []string{"type", "data"}, "properties": obj{
			"id": str("optional; makes ingest idempotent (or the Idempotency-Key header)"), "type": str("resource.action"),
			"data": obj{"type": "object"}, "created": ts, "api_version": str("default 2026-11-01"),
			"ordering_key": obj{"type": "string", "pattern": "^[A-Za-z0-9_:.-]{1,128}$", "description": "on fifo endpoints, events with one key are delivered one at a time in acceptance order; without one, an event joins the endpoint's default sequence"}}},
		"Event": obj{"type": "object", "properties": obj{"id": str("evt_… or the producer's id"), "type": str(""), "created": ts,
			"api_version": str(""), "data": obj{"type": "object"}, "ordering_key": str("absent when the event has none"), "deliveries": arr(obj{"type": "object", "properties": obj{
				"id": str("dlv_…"), "endpoint_id": str(""), "status": str("")}}),
			"filtered_out": arr(obj{"type": "object", "description": "a subscribed endpoint whose filter skipped the event (absent when none did)",
				"properties": obj{"endpoint_id": str(""), "error": str("the filter's evaluation error, absent when it was false")}})}},
		"FilterTestRequest": obj{"type": "object", "properties": obj{
			"filter":       str("CEL expression; on an endpoint's route, defaults to the endpoint's filter"),
			"event_types":  arr(str("the subscription to test with; empty = all; on an endpoint's route, defaults to the endpoint's")),
			"last":         obj{"type": "integer", "minimum": 1, "maximum": service.MaxFilterTestLast, "default": service.FilterTestLastDefault},
			"endpoint_ids": arr(str("keep only the events one of these endpoints got or filtered out"))}},
		"FilterTest": obj{"type": "object", "properties": obj{"filter": str(""), "event_types": arr(str("")),
			"evaluated": obj{"type": "integer"}, "matched": obj{"type": "integer"}, "not_matched": obj{"type": "integer"},
			"errored": obj{"type": "integer"}, "not_subscribed": obj{"type": "integer"}, "truncated": obj{"type": "boolean"},
			"events": arr(obj{"type": "object", "properties": obj{"id": str(""), "type": str(""), "created": ts,
				"verdict": obj{"type": "string", "enum": []string{VerdictMatched, VerdictNotMatched, VerdictError, VerdictNotSubscribed}},
				"error":   str("the evaluation error (verdict error)")}})}},
		"Attempt": attempt,
		"Delivery": obj{"type": "object", "properties": obj{
			"id": str("dlv_…"), "event_id": str(""), "endpoint_id": str(""),
			"status": obj{"type": "string", "enum": delivery.Statuses()},
			"cycle":  obj{"type": "integer"}, "attempt_count": obj{"type": "integer"},
			"next_attempt_at":    obj{"type": []string{"string", "null"}, "format": "date-time"},
			"last_attempt":       obj{"oneOf": []obj{ref("Attempt"), {"type": "null"}}},
			"dead_letter_reason": nullable("string"),
			"event_type":         str(""),
			"last_status_code":   nullable("integer"),
			"replays":            arr(obj{"type": "object", "properties": obj{"at": ts, "by": str("API key or portal session ID"), "by_name": str("its name")}}),
			"sequence":           obj{"type": "integer", "description": "an ordered delivery's place in its sequence (webhook-sequence); absent when unordered"},
			"waiting_for":        str("dlv_…: the delivery ahead of a pending ordered delivery that has not ended; its first attempt waits for it"),
			"blocks_sequence":    obj{"type": "boolean", "description": "a dead letter that holds its fifo sequence (fifo_on_dead_letter block, not released): POST …/release lets the deliveries behind it go"},
			"created_at":         ts, "updated_at": ts}},
		"ReplayRange": obj{"type": "object", "required": []string{"since"}, "properties": obj{"since": ts, "until": ts,
			"dry_run": obj{"type": "boolean", "description": "answer 200 {\"would_replay\": n} and replay nothing"}}},
		"Replayed": obj{"type": "object", "properties": obj{"replayed": obj{"type": "integer"}}},
		"APIKeyRequest": obj{"type": "object", "required": []string{"name"}, "properties": obj{"name": str(""),
			"role":   obj{"type": "string", "enum": access.Roles(), "description": "default admin; an app key reaches only its app's routes (404 elsewhere)"},
			"app_id": str("the app an app key is bound to")}},
		"APIKey": obj{"type": "object", "properties": obj{"id": str("key_…"), "name": str(""), "role": str(""), "app_id": str(""),
			"prefix": str("the key's first characters"), "bootstrap": obj{"type": "boolean", "description": "the key configured as HOOKRELAY_ADMIN_KEY"},
			"created_at": ts, "last_used_at": obj{"type": []string{"string", "null"}, "format": "date-time"}}},
		"APIKeyWithKey": obj{"allOf": []obj{ref("APIKey"), {"type": "object", "properties": obj{"key": str("hr_…, shown once")}}}},
		"PortalLinkRequest": obj{"type": "object", "properties": obj{
			"capabilities": obj{"type": "array", "items": obj{"type": "string", "enum": access.Capabilities()}, "description": "view is always included"},
			"ttl":          str(fmt.Sprintf("Go duration from %s to %s, default %s: how long the link may be opened, and the session lasts", access.MinLinkTTL, access.MaxLinkTTL, access.LinkTTLDefault)),
			"endpoint_ids": arr(str("limit the session to these endpoints"))}},
		"PortalLink": obj{"type": "object", "properties": obj{"id": str("pl_…"), "url": str("open once, before expires_at"),
			"capabilities": arr(str("")), "endpoint_ids": arr(str("")), "expires_at": ts}},
		"AuditEntry": obj{"type": "object", "properties": obj{"id": str(""), "at": ts, "app_id": str(""),
			"actor_kind": obj{"type": "string", "enum": []string{"key", "portal"}}, "actor_id": str("key_… or ps_…"), "actor_name": str(""),
			"method": str(""), "route": str(""), "path": str(""), "status": obj{"type": "integer"}}},
		"Stats": obj{"type": "object", "description": "The acceptance figures (docs/contract.md#8-acceptance-figures) over the latest `last` events. An event with several endpoints has several " +
			"deliveries, so the success figures and the rate count deliveries, each by its first cycle; replays are counted apart " +
			"and never change the first-cycle figures.",
			"properties": obj{
				"events":                  obj{"type": "integer", "description": "events that had at least one delivery"},
				"deliveries":              obj{"type": "integer", "description": "those events' deliveries"},
				"first_attempt_success":   obj{"type": "integer", "description": "deliveries whose first cycle succeeded on attempt 1"},
				"retry_success":           obj{"type": "integer", "description": "deliveries whose first cycle succeeded on a later attempt"},
				"effective_delivery_rate": obj{"type": "number", "description": "(first_attempt_success + retry_success) / deliveries"},
				"dead_lettered":           obj{"type": "integer", "description": "deliveries dead-lettered now"},
				"pending":                 obj{"type": "integer", "description": "deliveries pending or delivering now"},
				"replayed":                obj{"type": "integer", "description": "deliveries replayed at least once"},
				"replay_success":          obj{"type": "integer", "description": "replayed deliveries that succeeded in a replayed cycle"},
				"hourly": arr(obj{"type": "object", "description": "deliveries made in each of the last 24 hours, oldest first, by status now",
					"properties": obj{"hour": ts, "by_status": obj{"type": "object", "additionalProperties": obj{"type": "integer"}}}})}},
		"Problem": obj{"type": "object", "properties": obj{"type": str(""), "title": str(""), "status": obj{"type": "integer"},
			"detail": str(""), "fields": arr(str("the fields at fault"))}},
	}
}

func merge(a, b obj) obj {
	out := obj{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// OpenAPI returns the OpenAPI 3.1 document of the API.
func OpenAPI() obj {
	paths := obj{}
	problemResp := func(desc string) obj {
		return obj{"description": desc, "content": obj{"application/problem+json": obj{"schema": ref("Problem")}}}
	}
	for _, op := range operations() {
		item, _ := paths[op.path].(obj)
		if item == nil {
			item = obj{}
			paths[op.path] = item
		}
		var params []obj
		for _, seg := range strings.Split(op.path, "/") {
			if strings.HasPrefix(seg, "{") {
				params = append(params, obj{"name": strings.Trim(seg, "{}"), "in": "path", "required": true, "schema": obj{"type": "string"}})
			}
		}
		for _, q := range op.query {
			params = append(params, obj{"name": q, "in": "query", "schema": obj{"type": "string"}})
		}
		ok := obj{"description": http.StatusText(op.status)}
		if op.response != nil {
			ok["content"] = obj{"application/json": obj{"schema": op.response}}
		}
		o := obj{
			"summary":  op.summary,
			"security": []obj{{"bearer": []string{}}},
			"responses": obj{
				strconv.Itoa(op.status): ok,
				"401":                   problemResp("missing or wrong API key"),
				"404":                   problemResp("no such object in this app"),
				"422":                   problemResp("invalid field (named in fields)"),
				"429":                   problemResp("too many failed authentications from this client, or (ingest) the key's rate or the app's backlog is past its bound; retry after Retry-After"),
				"503":                   problemResp("database unavailable; retry"),
			},
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
		if op.request != nil {
			o["requestBody"] = obj{"required": true, "content": obj{"application/json": obj{"schema": op.request}}}
		}
		item[strings.ToLower(op.method)] = o
	}
	readySchema := obj{"type": "object", "properties": obj{
		"status":   obj{"type": "string", "enum": []string{readyOK, readyDegraded, readyUnavailable}},
		"postgres": str("ok or unreachable"), "temporal": str("ok, unreachable, not configured, or the namespace's missing search attributes"),
	}}
	paths["/healthz"] = obj{"get": obj{"summary": "Process is up", "responses": obj{"200": obj{"description": "OK"}}}}
	paths["/readyz"] = obj{"get": obj{"summary": "Whether this process takes events: Postgres reachable (Temporal unreachable is degraded, still 200)", "responses": obj{
		"200": obj{"description": "takes events; status ok, or degraded while Temporal is unreachable or its namespace incomplete", "content": obj{"application/json": obj{"schema": readySchema}}},
		"503": obj{"description": "Postgres unreachable", "content": obj{"application/json": obj{"schema": readySchema}}}}}}
	return obj{
		"openapi": "3.1.0",
		"info":    obj{"title": "hookrelay", "version": Version, "description": "Durable webhook delivery on Temporal and Postgres."},
		"paths":   paths,
		"components": obj{
			"schemas":         schemas(),
			"securitySchemes": obj{"bearer": obj{"type": "http", "scheme": "bearer"}},
		},
	}
}

func (s *Server) openapi(c *gin.Context) { c.JSON(http.StatusOK, OpenAPI()) }
