-- +goose Up
-- The operator's per-endpoint override of --egress-proxy: NULL follows the
-- deployment's setting, 'direct' sends without a proxy, anything else is a
-- proxy URL without credentials (only the admin key may set it).
ALTER TABLE endpoints ADD COLUMN egress_proxy text CHECK (egress_proxy IS NULL OR egress_proxy <> '');

-- +goose Down
ALTER TABLE endpoints DROP COLUMN egress_proxy;
