-- +goose Up
-- A cancel (endpoint disabled or deleted) that found the delivery's
-- request on the wire leaves the delivery delivering and notes its reason
-- here: the answer that arrives after it is recorded as an attempt, and
-- a dead letter its workflow then decides is recorded as this cancel (no
-- dead-letter event, no failing streak for an endpoint the user disabled).
-- A replay's new cycle clears it.
ALTER TABLE deliveries ADD COLUMN cancel_reason text;

-- +goose Down
ALTER TABLE deliveries DROP COLUMN cancel_reason;
