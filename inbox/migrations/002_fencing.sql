-- +goose Up
-- Every claim takes a new lease number; completion, reschedule and heartbeat
-- apply only for the current one, so a worker whose lease ran out cannot
-- change a task another worker took over. A task that failed too often is
-- dead, with its last error, until retried by hand.
ALTER TABLE webhook_inbox_tasks ADD COLUMN IF NOT EXISTS lease bigint NOT NULL DEFAULT 0;
ALTER TABLE webhook_inbox_tasks DROP CONSTRAINT IF EXISTS webhook_inbox_tasks_status_check;
ALTER TABLE webhook_inbox_tasks ADD CONSTRAINT webhook_inbox_tasks_status_check
    CHECK (status IN ('pending', 'processing', 'completed', 'dead'));
DROP INDEX IF EXISTS webhook_inbox_tasks_ready;
CREATE INDEX webhook_inbox_tasks_ready ON webhook_inbox_tasks (run_after) WHERE status IN ('pending', 'processing');

-- +goose Down
DROP INDEX IF EXISTS webhook_inbox_tasks_ready;
CREATE INDEX webhook_inbox_tasks_ready ON webhook_inbox_tasks (run_after) WHERE status <> 'completed';
UPDATE webhook_inbox_tasks SET status = 'pending' WHERE status = 'dead';
ALTER TABLE webhook_inbox_tasks DROP CONSTRAINT webhook_inbox_tasks_status_check;
ALTER TABLE webhook_inbox_tasks ADD CONSTRAINT webhook_inbox_tasks_status_check CHECK (status IN ('pending', 'processing', 'completed'));
ALTER TABLE webhook_inbox_tasks DROP COLUMN lease;
