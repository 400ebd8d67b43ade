-- +goose Up
-- First attempts are sent straight from the outbox by a worker's sender,
-- under a lease: a start row is leased (leased_until) while its first
-- attempt is waited for and made, and keeps that attempt's outcome
-- (outcome) once it is recorded, so a row whose lease lapsed (its worker
-- died) is handed to its DeliveryWorkflow without being sent again.
-- A row is claimed by claim_by: a start row whose first attempt is due
-- later (1 s after acceptance by default) may wait in the outbox, so one
-- dispatcher round takes many rows instead of one round per event.
ALTER TABLE outbox
    ADD COLUMN app_id       text,
    ADD COLUMN leased_until timestamptz,
    ADD COLUMN outcome      jsonb,
    ADD COLUMN claim_by     timestamptz NOT NULL DEFAULT now();
UPDATE outbox o SET app_id = d.app_id FROM deliveries d WHERE d.id = o.delivery_id;
-- A cancel row whose delivery is gone belongs to no app ('').
UPDATE outbox SET app_id = '' WHERE app_id IS NULL;
ALTER TABLE outbox ALTER COLUMN app_id SET DEFAULT '', ALTER COLUMN app_id SET NOT NULL;
-- Rows are claimed fairly across apps: a few of each app's oldest per round.
CREATE INDEX outbox_app ON outbox (app_id, id);
CREATE INDEX outbox_unleased ON outbox (claim_by) WHERE leased_until IS NULL;

-- An attempt whose request is on the wire: until it is recorded (or this
-- time passes, its worker having died), a cancel leaves the delivery
-- delivering and its owner records the cancel after the answer.
ALTER TABLE deliveries ADD COLUMN inflight_until timestamptz;

-- +goose Down
ALTER TABLE deliveries DROP COLUMN inflight_until;
DROP INDEX outbox_unleased;
DROP INDEX outbox_app;
ALTER TABLE outbox DROP COLUMN claim_by, DROP COLUMN outcome, DROP COLUMN leased_until, DROP COLUMN app_id;
