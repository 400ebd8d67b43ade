-- +goose Up
-- Per-endpoint bound on concurrent requests, across every worker: each
-- request holds a lease row for its duration (expiring, so a worker that
-- died frees it).
ALTER TABLE endpoints ADD COLUMN max_in_flight int CHECK (max_in_flight IS NULL OR max_in_flight > 0);
CREATE TABLE endpoint_flights (
    id          text PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    expires_at  timestamptz NOT NULL
);
CREATE INDEX endpoint_flights_endpoint ON endpoint_flights (endpoint_id, expires_at);

-- +goose Down
DROP TABLE endpoint_flights;
ALTER TABLE endpoints DROP COLUMN max_in_flight;
