// Package testvectors embeds the signature test vectors
// (signatures.json, copied from the project's shared vectors) for the
// signing, webhook and CLI tests.
package testvectors

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

//go:embed signatures.json
var raw []byte

// Vectors mirrors signatures.json.
type Vectors struct {
	Standard struct {
		Secret           string   `json:"secret"`
		ID               string   `json:"id"`
		Timestamp        int64    `json:"timestamp"`
		Payload          string   `json:"payload"`
		Expected         string   `json:"expected_signature_header"`
		MustFail         []string `json:"must_fail_signatures"`
		MustPassMixed    string   `json:"must_pass_mixed_header"`
		InvalidSecrets   []string `json:"invalid_secrets"`
		ToleranceSeconds int64    `json:"tolerance_seconds"`
	} `json:"standard_webhooks_v1"`
	Ed25519 struct {
		SecretKey string `json:"secret_key"`
		PublicKey string `json:"public_key"`
		ID        string `json:"id"`
		Timestamp int64  `json:"timestamp"`
		Payload   string `json:"payload"`
		Expected  string `json:"expected_signature_header"`
	} `json:"standard_webhooks_v1a_ed25519"`
	X struct {
		Secret    string `json:"secret"`
		Timestamp int64  `json:"timestamp"`
		Payload   string `json:"payload"`
		Expected  string `json:"expected_header"`
	} `json:"x_webhook_signature"`
	Rotation struct {
		NewSecret      string `json:"new_secret"`
		PreviousSecret string `json:"previous_secret"`
		ID             string `json:"id"`
		Timestamp      int64  `json:"timestamp"`
		Payload        string `json:"payload"`
		ExpectedStd    string `json:"expected_webhook_signature"`
		ExpectedX      string `json:"expected_x_webhook_signature"`
	} `json:"rotation"`
}

// Load parses the embedded vectors.
func Load() (Vectors, error) {
	var v Vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("parse signatures.json: %w", err)
	}
	return v, nil
}
