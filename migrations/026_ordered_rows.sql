-- +goose Up
-- The start and replay rows of a delivery in a keyed sequence wait in the
-- outbox behind their sequence's head, for as long as the head takes. They
-- are marked, so an app's backlog (the bound of its ingest) does not count
-- them: one blocked or slow key does not refuse the app's other events.
-- Each key's backlog is bounded at ingest on its own instead. (An
-- endpoint's default sequence, events with no key, is one line for the
-- whole endpoint: its rows stay the app's backlog.)
ALTER TABLE outbox ADD COLUMN ordered boolean NOT NULL DEFAULT false;
UPDATE outbox o SET ordered = true FROM deliveries d
  WHERE d.id = o.delivery_id AND d.sequence IS NOT NULL AND d.ordering_key <> '' AND o.kind IN ('start', 'replay');
CREATE INDEX outbox_app_backlog ON outbox (app_id, id) WHERE NOT ordered;

-- +goose Down
DROP INDEX outbox_app_backlog;
ALTER TABLE outbox DROP COLUMN ordered;
