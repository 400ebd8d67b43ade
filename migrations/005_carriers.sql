-- +goose Up
-- A batch of start rows a carrier workflow takes is named (stamped with the
-- carrier's workflow ID) in a committed transaction before the carrier
-- starts, so a dispatcher that dies between the start and the delete starts
-- the same carrier again, which Temporal rejects as a duplicate.
ALTER TABLE outbox ADD COLUMN carrier_id text;
CREATE INDEX outbox_carrier ON outbox (carrier_id) WHERE carrier_id IS NOT NULL;

-- +goose Down
DROP INDEX outbox_carrier;
ALTER TABLE outbox DROP COLUMN carrier_id;
