-- +goose Up
-- A sequencer's hold of its sequence lives in a row of its own: a
-- producer's uncommitted publish of the key locks the counter row
-- (sequences) until it commits, and a renewal of the hold there waited for
-- it (and a run stopped after 30 s, its key's committed deliveries
-- stalled). No publish touches this table. The hold's end is written on
-- the database's clock.
CREATE TABLE sequence_holds (
  endpoint_id text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  ordering_key text NOT NULL,
  leased_by text NOT NULL,
  leased_until timestamptz NOT NULL,
  PRIMARY KEY (endpoint_id, ordering_key)
);
INSERT INTO sequence_holds (endpoint_id, ordering_key, leased_by, leased_until)
  SELECT endpoint_id, ordering_key, leased_by, leased_until FROM sequences
  WHERE leased_by IS NOT NULL AND leased_until IS NOT NULL;
ALTER TABLE sequences DROP COLUMN leased_by, DROP COLUMN leased_until;

-- +goose Down
ALTER TABLE sequences ADD COLUMN leased_by text, ADD COLUMN leased_until timestamptz;
UPDATE sequences s SET leased_by = h.leased_by, leased_until = h.leased_until
  FROM sequence_holds h WHERE h.endpoint_id = s.endpoint_id AND h.ordering_key = s.ordering_key;
DROP TABLE sequence_holds;
