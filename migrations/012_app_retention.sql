-- +goose Up
-- Per-app override of the server's retention (NULL: the server's).
ALTER TABLE apps ADD COLUMN retention_ms bigint CHECK (retention_ms IS NULL OR retention_ms > 0);

-- +goose Down
ALTER TABLE apps DROP COLUMN retention_ms;
