-- +goose Up
-- When an endpoint's unbroken run of dead letters began: past the
-- auto-disable window (with at least its minimum of dead letters) the
-- endpoint is disabled with reason sustained_failure.
ALTER TABLE endpoints ADD COLUMN failing_since timestamptz;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN failing_since;
