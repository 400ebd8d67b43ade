-- +goose Up
-- Ordered delivery (docs/contract.md#14-ordered-delivery). An endpoint's
-- ordering is 'none' (every delivery on its own, as before) or 'fifo'
-- (deliveries of one ordering key one at a time, in acceptance order).
ALTER TABLE endpoints ADD COLUMN ordering text NOT NULL DEFAULT 'none'
  CHECK (ordering IN ('none', 'fifo'));
-- What a fifo sequence does when its head dead-letters: move on ('skip')
-- or wait until the dead letter is replayed and succeeds or is released
-- ('block').
ALTER TABLE endpoints ADD COLUMN fifo_on_dead_letter text NOT NULL DEFAULT 'skip'
  CHECK (fifo_on_dead_letter IN ('skip', 'block'));
-- The producer's ordering key; NULL when the event names none.
ALTER TABLE events ADD COLUMN ordering_key text;
-- A delivery to a fifo endpoint: its key ('' for the endpoint's default
-- sequence) and its place in that sequence (1-based). NULL for every
-- delivery to an unordered endpoint.
ALTER TABLE deliveries ADD COLUMN ordering_key text, ADD COLUMN sequence bigint;
-- An ordered delivery's dead-letter choice, its endpoint's at acceptance
-- (true: block), and when its dead letter was released from blocking.
ALTER TABLE deliveries ADD COLUMN fifo_block boolean, ADD COLUMN released_at timestamptz;
-- A release row tells a blocked sequence that its head was released.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('start', 'replay', 'cancel', 'release'));
-- The deliveries ahead of one in its sequence (a delivery's waiting_for);
-- partial, so unordered deliveries write nothing to it.
CREATE INDEX deliveries_sequence ON deliveries (endpoint_id, ordering_key, sequence) WHERE sequence IS NOT NULL;
-- The last sequence number given per fifo endpoint and key. Publish
-- increments it in the producer's transaction; its row lock orders
-- concurrent publishers of one key, so sequence order is commit order.
-- Unordered endpoints have no row.
CREATE TABLE sequences (
  endpoint_id text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  ordering_key text NOT NULL,
  last bigint NOT NULL,
  PRIMARY KEY (endpoint_id, ordering_key)
);

-- +goose Down
DROP TABLE sequences;
DELETE FROM outbox WHERE kind = 'release';
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check CHECK (kind IN ('start', 'replay', 'cancel'));
ALTER TABLE deliveries DROP COLUMN ordering_key, DROP COLUMN sequence, DROP COLUMN fifo_block, DROP COLUMN released_at;
ALTER TABLE events DROP COLUMN ordering_key;
ALTER TABLE endpoints DROP COLUMN ordering, DROP COLUMN fifo_on_dead_letter;
