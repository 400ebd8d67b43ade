-- +goose Up
-- The version of each resource a receiver applied (ApplyIfNewer), and every
-- outcome: applied, stale, duplicate or conflict.
CREATE TABLE IF NOT EXISTS webhook_inbox_versions (
    source     text NOT NULL,
    resource   text NOT NULL,
    version    numeric,
    event_id   text,
    content    bytea,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, resource)
);
CREATE TABLE IF NOT EXISTS webhook_inbox_outcomes (
    id         bigserial PRIMARY KEY,
    source     text NOT NULL,
    resource   text NOT NULL,
    event_id   text NOT NULL,
    version    numeric,
    outcome    text NOT NULL CHECK (outcome IN ('applied', 'stale', 'duplicate', 'conflict')),
    reason     text NOT NULL DEFAULT '',
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS webhook_inbox_outcomes_resource ON webhook_inbox_outcomes (source, resource, id);

-- +goose Down
DROP TABLE webhook_inbox_outcomes;
DROP TABLE webhook_inbox_versions;
