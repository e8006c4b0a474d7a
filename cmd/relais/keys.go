package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/relais/relais/config"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/keyring"
)

// loadKeys returns the keyring that encrypts secret values: from
// RELAIS_DATA_KEYS, else RELAIS_DATA_KEY_FILE, else (embedded mode only) the
// data directory's generated data-keys file. On an external database
// without keys it returns nil, and the engine refuses to store secrets.
// The keyring is checked against the database before anything is served.
func loadKeys(ctx context.Context, cfg config.Config, db *database, logger *slog.Logger) (*keyring.Keyring, error) {
	var ring *keyring.Keyring
	var err error
	switch {
	case cfg.DataKeys != "":
		ring, err = keyring.Parse(cfg.DataKeys)
		if err != nil {
			return nil, fmt.Errorf("RELAIS_DATA_KEYS: %w", err)
		}
	case cfg.DataKeyFile != "":
		b, rerr := os.ReadFile(cfg.DataKeyFile)
		if rerr != nil {
			return nil, fmt.Errorf("RELAIS_DATA_KEY_FILE: %w", rerr)
		}
		if ring, err = keyring.Parse(string(b)); err != nil {
			return nil, fmt.Errorf("RELAIS_DATA_KEY_FILE %s: %w", cfg.DataKeyFile, err)
		}
	case db.embedded():
		path := filepath.Join(cfg.DataDir, "data-keys")
		b, rerr := os.ReadFile(path)
		if errors.Is(rerr, fs.ErrNotExist) {
			b = []byte(keyring.NewKeySpec("k1") + "\n")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				return nil, fmt.Errorf("generate data key file: %w", err)
			}
			logger.Info("generated a data key for secret values", "file", path)
		} else if rerr != nil {
			return nil, fmt.Errorf("data key file: %w", rerr)
		}
		if ring, err = keyring.Parse(string(b)); err != nil {
			return nil, fmt.Errorf("data key file %s: %w", path, err)
		}
	default:
		logger.Warn("no data key configured: values of secret fields will be refused (set RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE)")
	}
	if err := engine.CheckKeys(ctx, db.pool, ring); err != nil {
		return nil, err
	}
	return ring, nil
}
