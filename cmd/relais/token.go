package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/config"
)

// tokenCreate takes --role and --name; every other flag is configuration
// (e.g. --database-url), so the command reaches the same database as serve.
func tokenCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	own := map[string]string{"role": "", "name": ""}
	var rest []string
	for i := 0; i < len(args); i++ {
		key := strings.TrimLeft(args[i], "-")
		key, value, hasValue := strings.Cut(key, "=")
		if _, ok := own[key]; !ok || !strings.HasPrefix(args[i], "-") {
			rest = append(rest, args[i])
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return fmt.Errorf("--%s needs a value", key)
			}
			i++
			value = args[i]
		}
		own[key] = value
	}
	roleFlag, name := own["role"], own["name"]
	role, err := auth.ParseRole(roleFlag)
	if err != nil {
		return err
	}
	if role == auth.RoleConsumer {
		return errors.New("consumer tokens belong to a consumer: create one with POST /api/v1/consumers")
	}
	if name == "" {
		return errors.New("--name is required")
	}
	cfg, err := config.Load(rest, getenv, stderr)
	if err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)
	db, err := openExisting(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer db.close()
	token, err := engine.New(db.pool, engine.Options{Logger: logger}).CreateToken(ctx, name, role)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", token)
	fmt.Fprintf(stderr, "token %q with role %s created; it is shown once.\n", name, role)
	return nil
}
