-- +goose Up
-- Per-endpoint rate limit, enforced across every worker: each attempt
-- reserves the next free slot (one per 1/rate seconds) in endpoint_slots, so
-- no burst exceeds the limit by more than one request.
ALTER TABLE endpoints ADD COLUMN rate_limit int CHECK (rate_limit IS NULL OR rate_limit > 0);
CREATE TABLE endpoint_slots (
    endpoint_id text PRIMARY KEY REFERENCES endpoints (id) ON DELETE CASCADE,
    next_slot   timestamptz NOT NULL
);

-- +goose Down
DROP TABLE endpoint_slots;
ALTER TABLE endpoints DROP COLUMN rate_limit;
