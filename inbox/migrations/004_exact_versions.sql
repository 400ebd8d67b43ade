-- +goose Up
-- Versions are kept exactly: a number as the exact decimal it was sent as
-- (version, unconstrained numeric), a string that is not a time as the
-- string itself (version_text), compared as strings.
ALTER TABLE webhook_inbox_versions ADD COLUMN IF NOT EXISTS version_text text;
ALTER TABLE webhook_inbox_outcomes ADD COLUMN IF NOT EXISTS version_text text;

-- +goose Down
ALTER TABLE webhook_inbox_outcomes DROP COLUMN version_text;
ALTER TABLE webhook_inbox_versions DROP COLUMN version_text;
