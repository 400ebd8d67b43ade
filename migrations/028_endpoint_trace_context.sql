-- +goose Up
-- What trace context an endpoint's receiver is sent: NULL follows the
-- deployment's --receiver-traces.
ALTER TABLE endpoints ADD COLUMN trace_context text
    CHECK (trace_context IN ('linked', 'fresh', 'off'));

-- +goose Down
ALTER TABLE endpoints DROP COLUMN trace_context;
