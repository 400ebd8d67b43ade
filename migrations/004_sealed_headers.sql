-- +goose Up
-- Custom endpoint headers (often a receiver's own auth token) are sealed at
-- rest like secrets, bound to their endpoint. `headers` keeps the names,
-- each with a masked value, for reads; rows written before this are sealed
-- when hookrelay starts (store.SealLegacyHeaders).
ALTER TABLE endpoints ADD COLUMN headers_sealed bytea;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN headers_sealed;
