package devstack

import (
	"fmt"
	"slices"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
)

// schemaVersionTable is the table where Temporal's SQL schema tool keeps a
// database's schema version: a database without it has no schema yet.
const schemaVersionTable = "schema_version"

// setupSchema brings a Temporal database to the schema embedded in the
// server module: version tables on first use, then every pending update.
func setupSchema(cfg *config.SQL, name string, logger log.Logger) error {
	conn, err := sqltool.NewConnection(cfg, logger)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", cfg.DatabaseName, err)
	}
	defer conn.Close()
	tables, err := conn.ListTables()
	if err != nil {
		return fmt.Errorf("list the tables of %s: %w", cfg.DatabaseName, err)
	}
	if !slices.Contains(tables, schemaVersionTable) {
		if err := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{InitialVersion: "0.0"}, logger).Run(); err != nil {
			return fmt.Errorf("set up schema of %s: %w", cfg.DatabaseName, err)
		}
	}
	if err := schema.NewUpdateSchemaTask(conn, &schema.UpdateConfig{DBName: cfg.DatabaseName, SchemaName: name}, logger).Run(); err != nil {
		return fmt.Errorf("update schema of %s: %w", cfg.DatabaseName, err)
	}
	return nil
}
