package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/relais/relais/internal/config"
)

// checkEnvironment warns, through warn, of each RELAIS_ variable of the
// process's environment that no command reads, and refuses one that
// misspells a variable of reads (what this command reads) not set itself:
// the command would otherwise run with that variable's default, a new
// embedded database for a misspelt RELAIS_DATABASE_URL, the local server
// for a misspelt RELAIS_URL. flagged lists the settings given as flags.
func checkEnvironment(reads, flagged []string, warn func(string)) error {
	warnings, refusals := config.UnknownVariables(os.Environ(), flagged, reads)
	for _, w := range warnings {
		warn(w)
	}
	if len(refusals) > 0 {
		return errors.New(strings.Join(refusals, "; "))
	}
	return nil
}

// loadAdmin is config.LoadAdmin with the command's logger, for a command
// that only opens the database; it checks the environment as serve does,
// before anything is opened.
func loadAdmin(usage string, args []string, getenv func(string) string, stderr io.Writer) (config.Config, *slog.Logger, error) {
	cfg, err := config.LoadAdmin(usage, args, getenv, stderr)
	if err != nil {
		return config.Config{}, nil, err
	}
	logger := newLogger(cfg, stderr)
	if err := checkEnvironment(config.AdminVariables(), cfg.Flagged, warnTo(logger)); err != nil {
		return config.Config{}, nil, err
	}
	return cfg, logger, nil
}

// warnTo logs a warning of checkEnvironment on logger.
func warnTo(logger *slog.Logger) func(string) {
	return func(w string) { logger.Warn(w) }
}
