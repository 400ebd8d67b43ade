-- +goose Up
-- A leased start row (a first attempt waiting for its due time, a request
-- out, a row held until its endpoint's probe) is skipped by the
-- dispatcher's claim and its look through their indexes: each app's
-- unleased rows by key, and the rows whose leases lapsed by that lapse
-- (per app for the claim, all apps for the look). Before, both walked
-- every leased row of every app, so a tenant whose endpoint stopped
-- answering (its rows held in the outbox) made every round cost as much
-- as its backlog: 50 ms a round beside 50,000 held rows.
DROP INDEX outbox_app_ready;
CREATE INDEX outbox_app_unleased ON outbox (app_id, id) WHERE leased_until IS NULL AND NOT held;
CREATE INDEX outbox_app_lapse ON outbox (app_id, leased_until, id) WHERE leased_until IS NOT NULL AND NOT held;
CREATE INDEX outbox_lapse ON outbox (leased_until, id) WHERE leased_until IS NOT NULL AND NOT held;

-- +goose Down
DROP INDEX outbox_lapse;
DROP INDEX outbox_app_lapse;
DROP INDEX outbox_app_unleased;
CREATE INDEX outbox_app_ready ON outbox (app_id, id) WHERE NOT held;
