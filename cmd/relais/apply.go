package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/relais/relais/internal/apply"
)

// applyCommand is `relais apply -f PATH [--dry-run]` against RELAIS_URL with
// RELAIS_TOKEN (a designer or admin token; destinations need admin).
func applyCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("f", "", "file or folder of YAML/JSON documents (kind: Definition, Release, Process, Destination)")
	dryRun := fs.Bool("dry-run", false, "show what would change without changing anything")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("usage: relais apply -f PATH [--dry-run]")
	}
	base := getenv("RELAIS_URL")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	token := getenv("RELAIS_TOKEN")
	if token == "" {
		return errors.New("RELAIS_TOKEN is required (a designer or admin token)")
	}
	docs, problems, err := apply.Load(*path)
	if err != nil {
		return err
	}
	if len(problems) == 0 {
		c := &apply.Client{URL: base, Token: token}
		prefix := ""
		if *dryRun {
			prefix = "(dry run) "
		}
		problems = c.Apply(ctx, docs, *dryRun, func(r apply.Result) { fmt.Fprintln(stdout, prefix+r.String()) })
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, p.String())
	}
	if len(problems) > 0 {
		return fmt.Errorf("%d problem(s); nothing after the first refused document was applied", len(problems))
	}
	return nil
}
