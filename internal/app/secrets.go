package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"hookrelay/access"
	"hookrelay/config"
	"hookrelay/secretbox"
	"hookrelay/store"
)

// RotateSecretKey seals every sealed value again with the newest key of
// HOOKRELAY_SECRET_KEY (a comma-separated list, newest first); afterwards
// the older keys can be dropped from it.
func RotateSecretKey(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	box, err := secretbox.Open(cfg.SecretKey)
	if err != nil {
		return fmt.Errorf("HOOKRELAY_SECRET_KEY: %w", err)
	}
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer pool.Close()
	n, err := store.New(pool, box).Reseal(ctx)
	if err != nil {
		return err
	}
	logger.Info("sealed again with the newest key", "values", n)
	return nil
}

// fileSecret returns value when set; else the secret kept in path, created
// with gen (mode 0600) on first start and, when announce is set, printed once.
func fileSecret(value, path string, gen func() (string, error), announce bool) (string, error) {
	if value != "" {
		return value, nil
	}
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	v, err := gen()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if announce {
		// Printed once, to the terminal only (not the log).
		fmt.Fprintf(os.Stderr, "\n  Admin API key (shown once, kept in %s):\n\n    %s\n\n", path, v)
	}
	return v, nil
}

func newAPIKey() (string, error) { return store.NewKey(access.RoleAdmin) }

// linkSigner signs portal links with a key derived from the newest secret
// key: rotating the secret key voids the links not yet opened.
func linkSigner(secretKeys string) access.Signer {
	newest, _, _ := strings.Cut(secretKeys, ",")
	return access.NewSigner([]byte(strings.TrimSpace(newest)))
}
