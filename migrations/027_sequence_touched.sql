-- +goose Up
-- When each sequence last took a delivery: a sequence idle past its app's
-- retention, with no open delivery, is pruned (its key starts again at 1).
ALTER TABLE sequences ADD COLUMN touched_at timestamptz NOT NULL DEFAULT now();

-- +goose Down
ALTER TABLE sequences DROP COLUMN touched_at;
