// Package testenv starts the real parts integration tests run against: a
// Postgres (HOOKRELAY_DATABASE_URL when set, else a private cluster from the
// system binaries in a temporary directory) with a fresh database per test
// package.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"hookrelay/internal/pgcluster"
	"hookrelay/migrations"
	"hookrelay/secretbox"
	"hookrelay/store"
)

// Postgres is a server the tests may create databases on.
type Postgres struct {
	// AdminURL reaches the "postgres" database as a role that may create
	// databases.
	AdminURL string
	// Cluster is the private cluster, nil when HOOKRELAY_DATABASE_URL is used.
	Cluster *pgcluster.Cluster
	dir     string
}

// StartPostgres returns a Postgres for the test binary. Call Stop when done
// (from TestMain).
func StartPostgres(ctx context.Context) (*Postgres, error) {
	if u := os.Getenv("HOOKRELAY_DATABASE_URL"); u != "" {
		return &Postgres{AdminURL: u}, nil
	}
	dir, err := os.MkdirTemp("", "hookrelay-pg-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: dir + "/data", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Postgres{AdminURL: c.URL("postgres"), Cluster: c, dir: dir}, nil
}

// Stop stops the private cluster and removes its files.
func (p *Postgres) Stop() {
	if p.Cluster != nil {
		_ = p.Cluster.Stop()
		os.RemoveAll(p.dir)
	}
}

// NewDatabase creates a database with a random name and returns its URL.
func (p *Postgres) NewDatabase(ctx context.Context, prefix string) (string, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.ToLower(prefix) + "_" + hex.EncodeToString(b)
	if err := pgcluster.CreateDatabase(ctx, p.AdminURL, name); err != nil {
		return "", err
	}
	u, err := url.Parse(p.AdminURL)
	if err != nil {
		return "", fmt.Errorf("parse admin url: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Store opens a migrated store on a new database.
func (p *Postgres) Store(ctx context.Context, prefix string) (*store.Store, error) {
	dbURL, err := p.NewDatabase(ctx, prefix)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if _, err := migrations.Up(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		return nil, err
	}
	key, err := secretbox.GenerateKey()
	if err != nil {
		return nil, err
	}
	raw, _ := secretbox.ParseKey(key)
	box, err := secretbox.New(raw)
	if err != nil {
		return nil, err
	}
	return store.New(pool, box), nil
}

// Main runs a test binary with a Postgres in *pg; it is for TestMain.
// Each extra starts something on that Postgres (an embedded Temporal
// server) and returns how to stop it.
func Main(m *testing.M, pg **Postgres, extras ...func(context.Context, *Postgres) (func(), error)) int {
	ctx := context.Background()
	p, err := StartPostgres(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer p.Stop()
	*pg = p
	for _, start := range extras {
		stop, err := start(ctx, p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testenv:", err)
			return 1
		}
		defer stop()
	}
	return m.Run()
}
