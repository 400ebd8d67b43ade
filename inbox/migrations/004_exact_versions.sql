-- +goose Up
-- Versions are kept exactly and with their kind (version_kind): a number
-- as the exact decimal it was sent as and a time as its instant in Unix
-- seconds (version, unconstrained numeric), any other string as itself
-- (version_text), compared as strings. Versions of different kinds do not
-- order.
ALTER TABLE webhook_inbox_versions ADD COLUMN IF NOT EXISTS version_text text, ADD COLUMN IF NOT EXISTS version_kind text;
ALTER TABLE webhook_inbox_outcomes ADD COLUMN IF NOT EXISTS version_text text, ADD COLUMN IF NOT EXISTS version_kind text;

-- +goose Down
ALTER TABLE webhook_inbox_outcomes DROP COLUMN version_text, DROP COLUMN version_kind;
ALTER TABLE webhook_inbox_versions DROP COLUMN version_text, DROP COLUMN version_kind;
