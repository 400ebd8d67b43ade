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
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
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
	// template is a database migrated once per test binary; each migrated
	// database a test asks for is a copy of it (CREATE DATABASE … TEMPLATE),
	// not a run of every migration.
	templateOnce sync.Once
	template     string
	templateErr  error
	// created and copied count CREATE DATABASE statements, all and those
	// copied from the template, for the line Main prints.
	created, copied atomic.Int64
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

// NewDatabase creates an empty database with a random name and returns its
// URL.
func (p *Postgres) NewDatabase(ctx context.Context, prefix string) (string, error) {
	return p.createDatabase(ctx, prefix, "")
}

// MigratedDatabase creates a database with every migration applied, as a
// copy of the binary's template database, and returns its URL.
func (p *Postgres) MigratedDatabase(ctx context.Context, prefix string) (string, error) {
	p.templateOnce.Do(func() { p.template, p.templateErr = p.migrateTemplate(ctx) })
	if p.templateErr != nil {
		return "", p.templateErr
	}
	return p.createDatabase(ctx, prefix, p.template)
}

func (p *Postgres) migrateTemplate(ctx context.Context) (string, error) {
	u, err := p.createDatabase(ctx, "template", "")
	if err != nil {
		return "", err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	// No connection may stay open on a template while it is copied.
	defer pool.Close()
	if _, err := migrations.Up(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		return "", err
	}
	return databaseName(u)
}

func databaseName(u string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("parse database url: %w", err)
	}
	return strings.TrimPrefix(parsed.Path, "/"), nil
}

func (p *Postgres) createDatabase(ctx context.Context, prefix, template string) (string, error) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.ToLower(prefix) + "_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, p.AdminURL)
	if err != nil {
		return "", fmt.Errorf("connect to create database %s: %w", name, err)
	}
	defer conn.Close(ctx)
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		stmt += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	p.created.Add(1)
	if template != "" {
		p.copied.Add(1)
	}
	u, err := url.Parse(p.AdminURL)
	if err != nil {
		return "", fmt.Errorf("parse admin url: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// Database creates a database for tb (every migration applied when
// migrated) and returns its URL; it is dropped when tb ends.
func (p *Postgres) Database(tb testing.TB, prefix string, migrated bool) string {
	tb.Helper()
	ctx := context.Background()
	create := p.NewDatabase
	if migrated {
		create = p.MigratedDatabase
	}
	u, err := create(ctx, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.drop(u) })
	return u
}

// Pool opens a pool on a new database for tb (see Database); it is closed,
// and the database dropped, when tb ends.
func (p *Postgres) Pool(tb testing.TB, prefix string, migrated bool) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), p.Database(tb, prefix, migrated))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pool.Close) // runs before the drop: cleanups run last first
	return pool
}

// PoolLike opens another pool on pool's database with its config changed
// by change (one connection, another query mode, hooks); it is closed when
// tb ends.
func PoolLike(tb testing.TB, pool *pgxpool.Pool, change func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	cfg := pool.Config().Copy()
	change(cfg)
	like, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(like.Close)
	return like
}

// Store opens a store, with a fresh sealing key, on a new migrated
// database for tb (see Pool).
func (p *Postgres) Store(tb testing.TB, prefix string) *store.Store {
	tb.Helper()
	key, err := secretbox.GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	box, err := secretbox.Open(key)
	if err != nil {
		tb.Fatal(err)
	}
	return store.New(p.Pool(tb, prefix, true), box)
}

// drop drops a test's database; a failure only leaves it behind with the
// cluster's temporary directory.
func (p *Postgres) drop(u string) {
	name, err := databaseName(u)
	if err != nil {
		return
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.AdminURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
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
	code := m.Run()
	fmt.Fprintf(os.Stderr, "testenv: %d CREATE DATABASE (%d copies of the migrated template)\n", p.created.Load(), p.copied.Load())
	return code
}
