-- +goose Up
-- A replay now gives the delivery its next cycle when it is queued
-- (store.ReplayDeliveries), so a late write of the earlier cycle cannot
-- change the replayed row. Replays queued before this version get theirs.
UPDATE deliveries d SET cycle = cycle + 1
WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.delivery_id = d.id AND o.kind = 'replay');

-- +goose Down
UPDATE deliveries d SET cycle = cycle - 1
WHERE EXISTS (SELECT 1 FROM outbox o WHERE o.delivery_id = d.id AND o.kind = 'replay');
