-- +goose Up
-- Cancels go through the outbox like starts and replays, so a cancel is as
-- durable as a replay. A cancel row must outlive the deliveries an app
-- delete removes, so the outbox no longer references deliveries; the
-- dispatcher drops start and replay rows whose delivery is gone.
ALTER TABLE outbox DROP CONSTRAINT outbox_delivery_id_fkey;
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('start', 'replay', 'cancel'));
CREATE INDEX outbox_delivery ON outbox (delivery_id);

-- The latest replay (its outbox row ID) a delivery's workflow has run, so a
-- replay row dispatched twice starts one cycle, not two.
ALTER TABLE deliveries ADD COLUMN replay_id bigint NOT NULL DEFAULT 0;

-- A 410 is a permanent failure (CONTRACT §4); "gone" is no class any more.
UPDATE attempts SET class = 'permanent' WHERE class = 'gone';

-- +goose Down
UPDATE attempts SET class = 'gone' WHERE class = 'permanent' AND status_code = 410;
ALTER TABLE deliveries DROP COLUMN replay_id;
DROP INDEX outbox_delivery;
DELETE FROM outbox WHERE kind = 'cancel' OR delivery_id NOT IN (SELECT id FROM deliveries);
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('start', 'replay'));
ALTER TABLE outbox ADD CONSTRAINT outbox_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES deliveries (id) ON DELETE CASCADE;
