package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/keyring"
)

// loadKeys returns the keyring that seals sensitive and secret values: from
// RELAIS_DATA_KEYS, else RELAIS_DATA_KEY_FILE, else (embedded mode only) the
// data directory's generated data-keys file. On an external database
// without keys it returns nil, and the engine refuses to store secrets.
// The keyring is checked against the database before anything is served.
//
// configured is what configuredKeys read, before anything was started.
func loadKeys(ctx context.Context, cfg config.Config, configured *keyring.Keyring, db *database, logger *slog.Logger) (*keyring.Keyring, error) {
	return loadKeysWith(ctx, cfg, configured, db, logger, engine.CheckKeys)
}

// loadKeysWith is loadKeys checking the keyring with check.
func loadKeysWith(ctx context.Context, cfg config.Config, configured *keyring.Keyring, db *database, logger *slog.Logger,
	check func(context.Context, *pgxpool.Pool, *keyring.Keyring) error) (*keyring.Keyring, error) {
	ring := configured
	var err error
	// Where the keys come from, which a refusal names: the fix is there.
	source := "RELAIS_DATA_KEYS"
	if cfg.DataKeys == "" && cfg.DataKeyFile != "" {
		source = "RELAIS_DATA_KEY_FILE " + cfg.DataKeyFile
	}
	switch {
	case ring != nil:
	case db.embedded():
		path := dataKeysPath(cfg)
		b, rerr := os.ReadFile(path)
		if errors.Is(rerr, fs.ErrNotExist) {
			// A new key opens nothing sealed with the lost one, and a
			// file that looks right would hide what was lost.
			recorded, err := engine.RecordedDataKeys(ctx, db.pool)
			if err != nil {
				return nil, err
			}
			if len(recorded) > 0 {
				return nil, fmt.Errorf("data key file %s is missing, but this database recorded data key(s) %s: restore the file from a backup of the data directory (or give the keys in RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE); a new key could not open what they sealed",
					path, strings.Join(recorded, ", "))
			}
			b = []byte(keyring.NewKeySpec("k1") + "\n")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				return nil, fmt.Errorf("generate data key file: %w", err)
			}
			logger.Info("generated a data key for sensitive and secret values", "file", path)
		} else if rerr != nil {
			return nil, fmt.Errorf("data key file: %w", rerr)
		}
		if ring, err = keyring.ParseFile(string(b)); err != nil {
			return nil, fmt.Errorf("data key file %s: %w", path, err)
		}
		warnIfShared(path, logger)
		source = "data key file " + path
	}
	if configured != nil && cfg.DataKeyFile != "" {
		warnIfShared(cfg.DataKeyFile, logger)
	}
	if err := check(ctx, db.pool, ring); err != nil {
		if ring == nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if ring == nil {
		// Said once the database is known to hold nothing sealed: a
		// replica that cannot start is not told what it would refuse.
		logger.Warn("no data key configured: values of sensitive and secret fields will be refused (set RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE)")
	}
	return ring, nil
}

// warnIfShared warns when the key file at path may be read by others than
// its owner: it opens every sensitive and secret value.
func warnIfShared(path string, logger *slog.Logger) {
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm()&0o077 == 0 {
		return
	}
	logger.Warn("the data key file may be read by others than its owner: chmod 600 it", "file", path, "mode", fmt.Sprintf("%04o", info.Mode().Perm()))
}

// configuredKeys reads the keys RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE
// give, if any: serve and keys rotate call it before they start anything,
// so that a malformed key fails with the configuration, not after an
// embedded cluster was created and started.
func configuredKeys(cfg config.Config) (*keyring.Keyring, error) {
	switch {
	case cfg.DataKeys != "":
		ring, err := keyring.Parse(cfg.DataKeys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Named("RELAIS_DATA_KEYS"), err)
		}
		return ring, nil
	case cfg.DataKeyFile != "":
		b, err := os.ReadFile(cfg.DataKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.Named("RELAIS_DATA_KEY_FILE"), err)
		}
		ring, err := keyring.ParseFile(string(b))
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", cfg.Named("RELAIS_DATA_KEY_FILE"), cfg.DataKeyFile, err)
		}
		return ring, nil
	}
	return nil, nil
}

// keysRotate is `relais keys rotate`: re-encrypt every secret value under the
// first key of the configured keyring, in resumable batches.
func keysRotate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, logger, err := loadAdmin("usage: relais keys rotate [flags]\n\nRe-encrypts every sealed value (sensitive and secret) with the first\ndata key, in resumable batches.", args, getenv, stderr)
	if err != nil {
		return err
	}
	configured, err := configuredKeys(cfg)
	if err != nil {
		return err
	}
	db, err := openExisting(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.close()
	// Recorded keys that sealed nothing still stored may be missing: the
	// rotation retires them with the others.
	ring, err := loadKeysWith(ctx, cfg, configured, db, logger, engine.CheckKeysForRotation)
	if err != nil {
		return err
	}
	if ring == nil {
		return errors.New("no data key configured: set RELAIS_DATA_KEYS or RELAIS_DATA_KEY_FILE with the new key first")
	}
	eng := engine.New(db.pool, engine.Options{Logger: logger, Keys: ring})
	fmt.Fprintf(stdout, "re-encrypting sensitive and secret values with key %q\n", ring.Primary())
	retired, err := eng.RotateKeys(ctx, func(p engine.RotationProgress) {
		fmt.Fprintf(stdout, "  %s: %d re-encrypted\n", p.Table, p.Total)
	})
	if err != nil {
		return fmt.Errorf("%w (run the command again to resume)", err)
	}
	if len(retired) == 0 {
		// Nothing to retire: said so, not that keys were (lifecycle QA).
		fmt.Fprintf(stdout, "done: every sealed value is sealed with %q; no other key was left to retire\n", ring.Primary())
		return nil
	}
	fmt.Fprintf(stdout, "done: every sealed value is sealed with %q; retired %s, which may now be removed from the configuration of every replica (a replica still sealing with a retired key now refuses to, 503 data_key_retired, until it restarts with %q first); keep each apart for as long as a backup taken before this rotation is kept: restoring one needs it\n",
		ring.Primary(), strings.Join(retired, ", "), ring.Primary())
	return nil
}

// dataKeysPath is the embedded data directory's data key file.
func dataKeysPath(cfg config.Config) string { return filepath.Join(cfg.DataDir, "data-keys") }
