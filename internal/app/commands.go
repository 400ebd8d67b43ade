package app

import (
	"context"
	"fmt"
	"hookrelay/config"
	"hookrelay/internal/temporalconn"
	"hookrelay/migrations"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdklog "go.temporal.io/sdk/log"
)

// temporalSettings are cfg's Temporal connection settings.
func temporalSettings(cfg config.Config) temporalconn.Settings {
	return temporalconn.Settings{
		Address: cfg.TemporalAddress, Namespace: cfg.TemporalNamespace, TLS: cfg.TemporalTLS,
		CAFile: cfg.TemporalTLSCA, CertFile: cfg.TemporalTLSCert, KeyFile: cfg.TemporalTLSKey,
		ServerName: cfg.TemporalTLSServerName, APIKey: cfg.TemporalAPIKey,
		Uncompressed: cfg.Dev || cfg.TemporalCompression == config.TemporalUncompressed,
	}
}

// SetupTemporal prepares the namespace on an external Temporal cluster:
// registers it when missing and adds the search attributes hookrelay sets
// (temporalconn.Required). It needs the cluster operator's permissions.
func SetupTemporal(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	tc, err := temporalconn.Dial(ctx, temporalSettings(cfg), sdklog.NewStructuredLogger(logger.With("component", "sdk")))
	if err != nil {
		return err
	}
	defer tc.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	added, err := temporalconn.Setup(ctx, tc, cfg.TemporalNamespace, temporalconn.HistoryRetention, temporalconn.Required())
	if err != nil {
		return err
	}
	logger.Info("temporal namespace ready for hookrelay", "namespace", cfg.TemporalNamespace, "added", added)
	return nil
}

// Migrate applies pending migrations and exits.
func Migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer pool.Close()
	v, err := migrations.Up(ctx, pool, logger)
	if err != nil {
		return err
	}
	logger.Info("database at migration version", "version", v)
	return nil
}
