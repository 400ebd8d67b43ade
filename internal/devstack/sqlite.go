package devstack

import (
	"errors"
	"fmt"
	"os"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/server/common/config"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	sqliteschema "go.temporal.io/server/schema/sqlite"
)

// sqliteStore prepares a SQLite (WAL) file as the server's store, with the
// namespace and its search attributes. The server module links the SQLite
// plugin anyway; hookrelay uses it to measure SQLite against Postgres.
func sqliteStore(file, cluster, namespace string, sa map[string]enumspb.IndexedValueType) (*config.SQL, error) {
	conf := &config.SQL{
		PluginName:        sqliteplugin.PluginName,
		DatabaseName:      file,
		ConnectAttributes: map[string]string{"mode": "rwc", "journal_mode": "wal", "synchronous": "normal", "busy_timeout": "10000"},
		MaxConns:          4,
		MaxIdleConns:      4,
	}
	if _, err := os.Stat(file); errors.Is(err, os.ErrNotExist) {
		if err := sqliteschema.SetupSchema(conf); err != nil {
			return nil, fmt.Errorf("sqlite schema: %w", err)
		}
	}
	ns, err := sqliteschema.NewNamespaceConfig(cluster, namespace, false, sa)
	if err != nil {
		return nil, fmt.Errorf("sqlite namespace: %w", err)
	}
	if err := sqliteschema.CreateNamespaces(conf, ns); err != nil {
		return nil, fmt.Errorf("sqlite namespace: %w", err)
	}
	return conf, nil
}
