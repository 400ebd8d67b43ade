-- +goose Up
-- API keys become managed objects: named, admin or bound to one app,
-- revocable. The key configured as HOOKRELAY_ADMIN_KEY is the one row
-- marked bootstrap: a changed key replaces it instead of adding another.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys
    ADD COLUMN name         text NOT NULL DEFAULT '',
    ADD COLUMN app_id       text REFERENCES apps (id) ON DELETE CASCADE,
    ADD COLUMN bootstrap    boolean NOT NULL DEFAULT false,
    ADD COLUMN last_used_at timestamptz,
    ADD COLUMN revoked_at   timestamptz,
    ADD CONSTRAINT api_keys_role_check CHECK (
        (role = 'admin' AND app_id IS NULL) OR (role = 'app' AND app_id IS NOT NULL));
UPDATE api_keys SET name = 'admin (configured)', bootstrap = true;
-- Keys made before this migration were all the configured admin key; only
-- the newest stays the bootstrap row.
UPDATE api_keys SET bootstrap = false
 WHERE id <> (SELECT id FROM api_keys ORDER BY created_at DESC, id DESC LIMIT 1);
CREATE UNIQUE INDEX api_keys_one_bootstrap ON api_keys (bootstrap) WHERE bootstrap;
CREATE INDEX api_keys_revoked ON api_keys (revoked_at) WHERE revoked_at IS NOT NULL;

-- Who did a replay: the key or portal session's ID (requested_by) and its
-- name at the time.
ALTER TABLE replays ADD COLUMN requested_by_name text NOT NULL DEFAULT '';

-- Every state-changing call, with who made it.
CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    app_id      text,
    actor_kind  text NOT NULL CHECK (actor_kind IN ('key', 'portal')),
    actor_id    text NOT NULL,
    actor_name  text NOT NULL,
    method      text NOT NULL,
    route       text NOT NULL,
    path        text NOT NULL,
    status      int NOT NULL
);
CREATE INDEX audit_log_app ON audit_log (app_id, id DESC);

-- Portal links: single-use, expiring; the token in the URL is signed and
-- names its row. Opening one makes a session.
CREATE TABLE portal_links (
    id           text PRIMARY KEY,
    app_id       text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    capabilities text[] NOT NULL,
    endpoint_ids text[] NOT NULL DEFAULT '{}',
    session_ms   bigint NOT NULL CHECK (session_ms > 0),
    expires_at   timestamptz NOT NULL,
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    used_at      timestamptz
);

-- Portal sessions, found by the SHA-256 of the cookie's value.
CREATE TABLE portal_sessions (
    id           text PRIMARY KEY,
    token_hash   bytea NOT NULL UNIQUE,
    link_id      text NOT NULL REFERENCES portal_links (id) ON DELETE CASCADE,
    app_id       text NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
    capabilities text[] NOT NULL,
    endpoint_ids text[] NOT NULL DEFAULT '{}',
    csrf         text NOT NULL,
    expires_at   timestamptz NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX portal_sessions_expires ON portal_sessions (expires_at);

-- +goose Down
DROP TABLE portal_sessions;
DROP TABLE portal_links;
DROP TABLE audit_log;
ALTER TABLE replays DROP COLUMN requested_by_name;
DELETE FROM api_keys WHERE role <> 'admin';
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys DROP COLUMN name, DROP COLUMN app_id, DROP COLUMN bootstrap, DROP COLUMN last_used_at, DROP COLUMN revoked_at;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check CHECK (role IN ('admin'));
