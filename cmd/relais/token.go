package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/suggest"
)

// tokenPage is how many tokens token list reads at once.
const tokenPage = 500

const tokenUsage = "usage: relais token create --role ROLE --name NAME [--expires-in DURATION] | relais token list | relais token revoke ID"

// The token commands' help, each followed by the configuration flags that
// reach the database serve uses.
const (
	tokenCreateUsage = `usage: relais token create --role ROLE --name NAME [--expires-in DURATION] [flags]

Creates a staff token and prints it once.

  --role ROLE             admin, designer or operator (required; a consumer's
                          token comes with the consumer: POST /api/v1/consumers)
  --name NAME             who or what holds it, shown in token list and the
                          audit logs (required, at most 200 bytes)
  --expires-in DURATION   ISO-8601, such as P90D (without it the token does
                          not expire)`
	tokenListUsage = `usage: relais token list [flags]

Lists the staff tokens that are not revoked.`
	tokenRevokeUsage = `usage: relais token revoke ID [flags]

Revokes a staff token at once; ID is its id in relais token list.`
)

// wantsHelp reports whether args ask for a command's help.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// help writes usage with the configuration flags and returns
// flag.ErrHelp.
func help(usage string, getenv func(string) string, stderr io.Writer) error {
	_, err := config.LoadAdmin(usage, []string{"-h"}, getenv, stderr)
	return err
}

// tokenCommand runs relais token create, list and revoke against the
// database serve uses (like serve, it needs no running server and no
// token: whoever can reach the database is an administrator already).
func tokenCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(tokenUsage)
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprintln(stderr, tokenUsage+"\n\nEach takes --help.")
		return flag.ErrHelp
	case "create":
		return tokenCreate(ctx, args[1:], getenv, stdout, stderr)
	case "list":
		return tokenList(ctx, args[1:], getenv, stdout, stderr)
	case "revoke":
		return tokenRevoke(ctx, args[1:], getenv, stdout, stderr)
	}
	if hint := suggest.Hint(args[0], []string{"create", "list", "revoke"}); hint != "" {
		return fmt.Errorf("unknown command \"token %s\"%s: %s", args[0], hint, tokenUsage)
	}
	return errors.New(tokenUsage)
}

// ownFlags takes the command's own flags (named in own) out of args; what
// is left is configuration (e.g. --database-url), so that the command
// reaches the same database as serve.
func ownFlags(args []string, own map[string]string) (rest []string, err error) {
	for i := 0; i < len(args); i++ {
		key := strings.TrimLeft(args[i], "-")
		key, value, hasValue := strings.Cut(key, "=")
		if _, ok := own[key]; !ok || !strings.HasPrefix(args[i], "-") {
			rest = append(rest, args[i])
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("--%s needs a value", key)
			}
			i++
			value = args[i]
		}
		own[key] = value
	}
	return rest, nil
}

// openEngine opens the existing database of cfg for an administration
// command.
func openEngine(ctx context.Context, usage string, rest []string, getenv func(string) string, stderr io.Writer) (*engine.Engine, func(), error) {
	cfg, logger, err := loadAdmin(usage, rest, getenv, stderr)
	if err != nil {
		return nil, nil, err
	}
	db, err := openExisting(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	return engine.New(db.pool, engine.Options{Logger: logger}), db.close, nil
}

// tokenCreate takes --role, --name and --expires-in.
func tokenCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if wantsHelp(args) {
		return help(tokenCreateUsage, getenv, stderr)
	}
	own := map[string]string{"role": "", "name": "", "expires-in": ""}
	rest, err := ownFlags(args, own)
	if err != nil {
		return err
	}
	if own["role"] == "" {
		return errors.New("--role is required: admin, designer or operator")
	}
	role, err := auth.ParseRole(own["role"])
	if err != nil {
		return fmt.Errorf("--role %q: must be admin, designer or operator", own["role"])
	}
	if role == auth.RoleConsumer {
		return errors.New("consumer tokens belong to a consumer: create one with POST /api/v1/consumers")
	}
	name := own["name"]
	if name == "" {
		return errors.New("--name is required")
	}
	var expiry engine.Expiry
	if s := own["expires-in"]; s != "" {
		// The API's parser (expires_in), whose errors say what to write
		// instead (PT1H for pt1h, days for months).
		if expiry.In, err = isoduration.Parse(s); err != nil {
			return fmt.Errorf("--expires-in: %w", err)
		}
		if expiry.In <= 0 {
			return fmt.Errorf("--expires-in %q: must be a positive duration, such as P90D", s)
		}
	}
	eng, closeDB, err := openEngine(ctx, tokenCreateUsage, rest, getenv, stderr)
	if err != nil {
		return err
	}
	defer closeDB()
	token, st, err := eng.CreateToken(ctx, name, role, expiry)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s\n", token)
	until := ""
	if st.ExpiresAt != nil {
		until = ", valid until " + st.ExpiresAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(stderr, "token %d %q with role %s created%s; it is shown once.\n", st.ID, name, role, until)
	return nil
}

// tokenList prints every staff token that is not revoked.
func tokenList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	eng, closeDB, err := openEngine(ctx, tokenListUsage, args, getenv, stderr)
	if err != nil {
		return err
	}
	defer closeDB()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tCREATED\tLAST USED\tEXPIRES")
	when := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for after := int64(0); ; {
		page, err := eng.ListStaffTokens(ctx, after, tokenPage)
		if err != nil {
			return err
		}
		for _, t := range page {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, when(&t.CreatedAt), when(t.LastUsedAt), when(t.ExpiresAt))
			after = t.ID
		}
		if len(page) < tokenPage {
			break
		}
	}
	return tw.Flush()
}

// tokenRevoke revokes the staff token with the id given.
func tokenRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if wantsHelp(args) {
		return help(tokenRevokeUsage, getenv, stderr)
	}
	arg, rest, ok := positional(args)
	if !ok {
		return errors.New("usage: relais token revoke ID [flags] (see relais token list)")
	}
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id < 1 {
		return fmt.Errorf("token id %q is not a number (see relais token list)", arg)
	}
	eng, closeDB, err := openEngine(ctx, tokenRevokeUsage, rest, getenv, stderr)
	if err != nil {
		return err
	}
	defer closeDB()
	if err := eng.RevokeStaffToken(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "token %d revoked\n", id)
	return nil
}

// positional takes a command's one argument out of args, before or after
// its flags (every flag takes a value: --flag value or --flag=value).
func positional(args []string) (arg string, rest []string, ok bool) {
	n := len(args)
	switch {
	case n == 0:
		return "", nil, false
	case !strings.HasPrefix(args[0], "-"):
		return args[0], args[1:], true
	case n >= 2 && !strings.HasPrefix(args[n-1], "-") && !(strings.HasPrefix(args[n-2], "-") && !strings.Contains(args[n-2], "=")):
		return args[n-1], args[:n-1], true
	}
	return "", nil, false
}
