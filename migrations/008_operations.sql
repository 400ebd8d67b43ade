-- +goose Up
-- Operational webhooks: the reserved app app_operations receives events
-- about the others (an endpoint disabled, failing, recovered; a dead letter).
-- Its endpoints are the operator's: same signing, same retry contract.
INSERT INTO apps (id, name) VALUES ('app_operations', 'hookrelay operational webhooks') ON CONFLICT DO NOTHING;
ALTER TABLE endpoints ADD COLUMN consecutive_failures int NOT NULL DEFAULT 0;
ALTER TABLE endpoints ADD COLUMN failing boolean NOT NULL DEFAULT false;
INSERT INTO event_types (name, description, schema) VALUES
 ('endpoint.disabled', 'An endpoint was disabled: its receiver answered 410 (gone_410), every delivery failed for the auto-disable window (sustained_failure), or someone disabled it (by_hand).',
  '{"type":"object","required":["app_id","endpoint_id","reason"],"properties":{"app_id":{"type":"string"},"endpoint_id":{"type":"string"},"reason":{"type":"string","enum":["gone_410","by_hand","sustained_failure"]},"detail":{"type":"string"}}}'),
 ('endpoint.failing', 'An endpoint''s last deliveries all dead-lettered: an early warning before its subscriber files a ticket.',
  '{"type":"object","required":["app_id","endpoint_id","consecutive_failures"],"properties":{"app_id":{"type":"string"},"endpoint_id":{"type":"string"},"consecutive_failures":{"type":"integer"}}}'),
 ('endpoint.recovered', 'A failing endpoint delivered again.',
  '{"type":"object","required":["app_id","endpoint_id"],"properties":{"app_id":{"type":"string"},"endpoint_id":{"type":"string"}}}'),
 ('delivery.dead_lettered', 'A delivery dead-lettered, with its reason.',
  '{"type":"object","required":["app_id","endpoint_id","delivery_id","event_id","reason"],"properties":{"app_id":{"type":"string"},"endpoint_id":{"type":"string"},"delivery_id":{"type":"string"},"event_id":{"type":"string"},"reason":{"type":"string"}}}')
ON CONFLICT (name) DO NOTHING;

-- +goose Down
ALTER TABLE endpoints DROP COLUMN failing;
ALTER TABLE endpoints DROP COLUMN consecutive_failures;
DELETE FROM apps WHERE id = 'app_operations';
