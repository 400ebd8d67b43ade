-- +goose Up
-- A start or replay row of a paused endpoint is held: it is marked here,
-- so the dispatcher's claims and ingest's wake check skip it through their
-- indexes instead of joining every held row to its endpoint (which made
-- every ingest and every round cost as much as all paused backlogs).
ALTER TABLE outbox ADD COLUMN held boolean NOT NULL DEFAULT false;
UPDATE outbox o SET held = true FROM deliveries d JOIN endpoints e ON e.id = d.endpoint_id
WHERE d.id = o.delivery_id AND e.paused AND o.kind <> 'cancel';
DROP INDEX outbox_unleased;
CREATE INDEX outbox_unleased ON outbox (claim_by) WHERE leased_until IS NULL AND NOT held;
CREATE INDEX outbox_app_ready ON outbox (app_id, id) WHERE NOT held;
CREATE INDEX outbox_held ON outbox (delivery_id) WHERE held;

-- +goose Down
DROP INDEX outbox_held;
DROP INDEX outbox_app_ready;
DROP INDEX outbox_unleased;
CREATE INDEX outbox_unleased ON outbox (claim_by) WHERE leased_until IS NULL;
ALTER TABLE outbox DROP COLUMN held;
