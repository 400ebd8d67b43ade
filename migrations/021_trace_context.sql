-- +goose Up
-- The W3C trace context (traceparent, tracestate) an event was published
-- in, when tracing was on: the dispatcher that claims its start rows,
-- maybe in another process, continues that trace. NULL when tracing was
-- off.
ALTER TABLE events ADD COLUMN traceparent text, ADD COLUMN tracestate text;

-- +goose Down
ALTER TABLE events DROP COLUMN traceparent, DROP COLUMN tracestate;
