package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"hookrelay/internal/devstack"
	"hookrelay/internal/pgcluster"
	"hookrelay/secretbox"
)

// startInfra starts the dev stack's infrastructure: the private Postgres
// (unless a database URL is set) and the embedded Temporal server and UI;
// it keeps the admin and secret keys in the data directory.
func (st *Stack) startInfra(ctx context.Context) error {
	cfg := &st.Config
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if cfg.DatabaseURL == "" {
		logf, err := os.OpenFile(filepath.Join(cfg.DataDir, "postgres.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("open postgres log: %w", err)
		}
		st.closers = append(st.closers, func() { logf.Close() })
		pg, err := pgcluster.Start(ctx, pgcluster.Options{Dir: filepath.Join(cfg.DataDir, "postgres"), Port: cfg.PostgresPort, Log: logf, Logger: st.Logger})
		if err != nil {
			return err
		}
		st.PG = pg
		st.closers = append(st.closers, func() { _ = pg.Stop() })
		if err := pgcluster.CreateDatabase(ctx, pg.URL("postgres"), "hookrelay"); err != nil {
			return err
		}
		cfg.DatabaseURL = pg.URL("hookrelay")
	}
	tserver, err := devstack.Start(ctx, devstack.Options{
		PostgresURL:      cfg.DatabaseURL,
		FrontendAddr:     cfg.TemporalAddress,
		UIAddr:           cfg.TemporalUIAddr,
		Namespace:        cfg.TemporalNamespace,
		SearchAttributes: SearchAttributes(),
		Shards:           int32(cfg.TemporalShards),
		SQLiteFile:       cfg.TemporalSQLite,
		Logger:           st.Logger.With("component", "temporal"),
	})
	if err != nil {
		return err
	}
	st.Temporal = tserver
	st.closers = append(st.closers, tserver.Stop)
	cfg.TemporalAddress = tserver.FrontendAddr()
	if cfg.AdminKey, err = fileSecret(cfg.AdminKey, filepath.Join(cfg.DataDir, "admin-key"), newAPIKey, true); err != nil {
		return err
	}
	if cfg.SecretKey, err = fileSecret(cfg.SecretKey, filepath.Join(cfg.DataDir, "secret-key"), secretbox.GenerateKey, false); err != nil {
		return err
	}
	return nil
}
