-- +goose Up
CREATE TABLE apps (
    id          text PRIMARY KEY,
    name        text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX apps_created ON apps (created_at DESC, id DESC);

-- API keys are stored as SHA-256 hashes of high-entropy random keys.
CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    key_hash    bytea NOT NULL UNIQUE,
    prefix      text NOT NULL,
    role        text NOT NULL CHECK (role IN ('admin')),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE event_types (
    name        text PRIMARY KEY,
    description text NOT NULL DEFAULT '',
    schema      jsonb,
    deprecated  boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE endpoints (
    id                 text PRIMARY KEY,
    app_id             text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    url                text NOT NULL,
    description        text NOT NULL DEFAULT '',
    event_types        text[] NOT NULL DEFAULT '{}',
    environment        text NOT NULL DEFAULT 'live' CHECK (environment IN ('live', 'test')),
    disabled           boolean NOT NULL DEFAULT false,
    disabled_reason    text,
    retry_schedule_ms  bigint[] NOT NULL,
    deadline_ms        bigint NOT NULL,
    request_timeout_ms bigint NOT NULL,
    headers            jsonb NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    deleted_at         timestamptz
);
CREATE INDEX endpoints_app ON endpoints (app_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

-- Secrets are AES-256-GCM sealed; only the key ID ever leaves the database.
CREATE TABLE endpoint_secrets (
    id           text PRIMARY KEY,
    endpoint_id  text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    sealed       bytea NOT NULL,
    status       text NOT NULL CHECK (status IN ('current', 'previous', 'revoked')),
    valid_until  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX endpoint_secrets_endpoint ON endpoint_secrets (endpoint_id, created_at DESC) WHERE status <> 'revoked';

CREATE TABLE events (
    app_id       text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    id           text NOT NULL,
    type         text NOT NULL,
    payload      bytea NOT NULL,
    payload_hash bytea NOT NULL,
    created      timestamptz NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (app_id, id)
);
CREATE INDEX events_app_received ON events (app_id, received_at DESC, id DESC);
CREATE INDEX events_app_type ON events (app_id, type, received_at DESC);

CREATE TABLE deliveries (
    id                 text PRIMARY KEY,
    app_id             text NOT NULL,
    event_id           text NOT NULL,
    endpoint_id        text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'delivering', 'succeeded', 'dead_lettered', 'canceled')),
    cycle              int NOT NULL DEFAULT 1,
    attempt_count      int NOT NULL DEFAULT 0,
    next_attempt_at    timestamptz,
    last_status_code   int,
    dead_letter_reason text,
    succeeded_attempt  int,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (app_id, event_id) REFERENCES events (app_id, id) ON DELETE CASCADE
);
CREATE INDEX deliveries_app ON deliveries (app_id, created_at DESC, id DESC);
CREATE INDEX deliveries_app_status ON deliveries (app_id, status, created_at DESC);
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, status, created_at DESC);
CREATE INDEX deliveries_event ON deliveries (app_id, event_id);

CREATE TABLE attempts (
    id               text PRIMARY KEY,
    delivery_id      text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    cycle            int NOT NULL,
    number           int NOT NULL,
    started_at       timestamptz NOT NULL,
    duration_ms      int NOT NULL,
    status_code      int,
    class            text NOT NULL,
    error            text NOT NULL DEFAULT '',
    response_excerpt text NOT NULL DEFAULT '',
    key_ids          text[] NOT NULL DEFAULT '{}',
    UNIQUE (delivery_id, cycle, number)
);

CREATE TABLE replays (
    id            bigserial PRIMARY KEY,
    delivery_id   text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    requested_by  text NOT NULL,
    requested_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX replays_delivery ON replays (delivery_id, requested_at);

-- The transactional outbox: one row per workflow start or replay signal,
-- written in the ingest transaction and drained by the dispatcher.
CREATE TABLE outbox (
    id           bigserial PRIMARY KEY,
    delivery_id  text NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('start', 'replay')),
    requested_by text,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE outbox;
DROP TABLE replays;
DROP TABLE attempts;
DROP TABLE deliveries;
DROP TABLE events;
DROP TABLE endpoint_secrets;
DROP TABLE endpoints;
DROP TABLE event_types;
DROP TABLE api_keys;
DROP TABLE apps;
