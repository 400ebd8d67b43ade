-- +goose Up
-- An endpoint is signed with HMAC (whsec_) or Ed25519 (whsk_, sealed; its
-- whpk_ public key is stored in the clear: receivers verify with it).
ALTER TABLE endpoints ADD COLUMN signature_scheme text NOT NULL DEFAULT 'hmac-sha256'
    CHECK (signature_scheme IN ('hmac-sha256', 'ed25519'));
ALTER TABLE endpoint_secrets ADD COLUMN public_key text;

-- +goose Down
ALTER TABLE endpoint_secrets DROP COLUMN public_key;
ALTER TABLE endpoints DROP COLUMN signature_scheme;
