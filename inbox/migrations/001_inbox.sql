-- +goose Up
-- Dedupe keys: one row per (source, event ID) whose business effect committed.
CREATE TABLE IF NOT EXISTS webhook_inbox_seen (
    source      text NOT NULL,
    event_id    text NOT NULL,
    accepted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, event_id)
);

-- Durable inbox for external side effects.
CREATE TABLE IF NOT EXISTS webhook_inbox_tasks (
    id           bigserial PRIMARY KEY,
    source       text NOT NULL,
    event_id     text NOT NULL,
    kind         text NOT NULL,
    payload      bytea NOT NULL,
    status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'processing', 'completed')),
    attempts     int NOT NULL DEFAULT 0,
    last_error   text,
    run_after    timestamptz NOT NULL DEFAULT now(),
    locked_until timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    UNIQUE (source, event_id, kind)
);
CREATE INDEX IF NOT EXISTS webhook_inbox_tasks_ready ON webhook_inbox_tasks (run_after) WHERE status <> 'completed';

-- +goose Down
DROP TABLE webhook_inbox_tasks;
DROP TABLE webhook_inbox_seen;
