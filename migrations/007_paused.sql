-- +goose Up
-- A paused endpoint keeps its deliveries pending (their outbox rows wait)
-- and sends nothing until resumed; disabled drops new fan-out instead.
ALTER TABLE endpoints ADD COLUMN paused boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN paused;
