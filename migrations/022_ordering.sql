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
-- The open deliveries of each sequence: not ended, or a dead letter that
-- blocks it (fifo_on_dead_letter block, not released). A sequencer's head
-- and a delivery's waiting_for are read from it; partial, so unordered
-- deliveries write nothing to it and a sequence's ended history is never
-- scanned. A delivery whose workflow failed or was terminated is released
-- from its sequence (released_at) too.
CREATE INDEX deliveries_sequence_open ON deliveries (endpoint_id, ordering_key, sequence)
  WHERE sequence IS NOT NULL AND released_at IS NULL
    AND (status IN ('pending', 'delivering') OR (status = 'dead_lettered' AND fifo_block));
-- The last sequence number given per fifo endpoint and key. Publish
-- increments it in the producer's transaction; its row lock orders
-- concurrent publishers of one key, so sequence order is commit order.
-- Unordered endpoints have no row.
CREATE TABLE sequences (
  endpoint_id text NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  ordering_key text NOT NULL,
  last bigint NOT NULL,
  -- The sequencer run that sends the sequence now, and until when: one
  -- sender per sequence, even when a stalled run's activity is retried
  -- elsewhere.
  leased_by text,
  leased_until timestamptz,
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
