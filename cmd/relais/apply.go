package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/relais/relais/internal/apply"
	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/suggest"
)

// applyCommand is `relais apply -f PATH [-f PATH...] [--dry-run]` against RELAIS_URL with
// RELAIS_TOKEN (a designer or admin token; destinations need admin).
func applyCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	// The help is for -h; an error is returned once, with a pointer to it
	// (see config.Load).
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	help := func() {
		fmt.Fprint(stderr, `usage: relais apply -f PATH [-f PATH...] [--dry-run]

Applies the YAML or JSON documents of files or folders (definitions,
releases, processes, destinations) to a running Relais: RELAIS_URL (default
http://127.0.0.1:8080) with RELAIS_TOKEN (a designer token; destinations
need an admin one).

flags:
`)
		fs.SetOutput(stderr)
		fs.PrintDefaults()
	}
	var paths pathList
	fs.Var(&paths, "f", "file or folder of YAML/JSON documents (kind: Definition, Release, Process, Destination); repeat -f for more, all applied as one set")
	dryRun := fs.Bool("dry-run", false, "show what would change without changing anything")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help()
			return err
		}
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
			if meant, ok := suggest.Closest(strings.TrimLeft(name, "-"), []string{"f", "dry-run"}); ok {
				return fmt.Errorf("%w (did you mean --%s?)", err, meant)
			}
		}
		return fmt.Errorf("%w (relais apply --help lists the flags)", err)
	}
	if fs.NArg() > 0 {
		// A path after the first would otherwise go unread while the
		// run reports success (apply -f a.yaml b.yaml).
		return fmt.Errorf("unexpected argument %q: give each file or folder with its own -f (relais apply -f a.yaml -f b.yaml)", fs.Arg(0))
	}
	if len(paths) == 0 {
		return errors.New("usage: relais apply -f PATH [-f PATH...] [--dry-run]")
	}
	c, err := apiClient(getenv, stderr, "a designer or admin token")
	if err != nil {
		return err
	}
	docs, problems, err := apply.Load(paths...)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, p.String())
		}
		return fmt.Errorf("%d problem(s) found before sending anything; nothing was applied", len(problems))
	}
	if err := c.Check(ctx); err != nil {
		if apply.Unreachable(err) {
			return retryLater{fmt.Errorf("%w; nothing was applied", err)}
		}
		return fmt.Errorf("%w; nothing was applied", err)
	}
	if refused := c.Permitted(docs); len(refused) > 0 {
		for _, p := range refused {
			fmt.Fprintln(stderr, p.String())
		}
		return fmt.Errorf("%d document(s) this token may not apply; nothing was applied", len(refused))
	}
	prefix := ""
	if *dryRun {
		prefix = "(dry run) "
	} else {
		// The whole set is checked first, as a dry run does, so that a
		// document the server would refuse stops the run before anything
		// is written: a revision is immutable and a release name taken
		// forever, so a refusal halfway would leave them behind.
		if problems := c.Apply(ctx, docs, true, func(apply.Result) {}); len(problems) > 0 {
			for _, p := range problems {
				fmt.Fprintln(stderr, p.String())
			}
			if problems[0].Unknown {
				return retryLater{fmt.Errorf("%s got no answer while checking the set; nothing was applied", problems[0].Doc.Name())}
			}
			return fmt.Errorf("%d problem(s) in %s; nothing was applied (the whole set is checked before any of it is)", len(problems), problems[0].Doc.Name())
		}
	}
	done := 0
	actions := map[string]int{}
	var order []string
	problems = c.Apply(ctx, docs, *dryRun, func(r apply.Result) {
		done++
		if actions[r.Action] == 0 {
			order = append(order, r.Action)
		}
		actions[r.Action]++
		fmt.Fprintln(stdout, prefix+r.String())
	})
	if len(problems) == 0 {
		// One line to end on, so that a run that changed nothing says so.
		counts := make([]string, len(order))
		for i, a := range order {
			counts[i] = fmt.Sprintf("%d %s", actions[a], a)
		}
		fmt.Fprintf(stdout, "%s%d document(s): %s\n", prefix, done, strings.Join(counts, ", "))
		return nil
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, p.String())
	}
	// Apply goes kind by kind, not in file order, so a document later in a
	// file may have been applied before the refused one: name both sides.
	refused := docs[done]
	verb := "applied"
	if *dryRun {
		verb = "checked"
	}
	fmt.Fprintf(stderr, "%s (in apply order: destinations, definitions, releases, processes): %s\n", verb, names(docs[:done]))
	if problems[0].Unknown {
		// The request went out and no answer came: it may have landed.
		fmt.Fprintf(stderr, "outcome unknown (no answer came; apply again, it is idempotent): %s\n", refused.Name())
		fmt.Fprintf(stderr, "not %s: %s\n", verb, names(docs[done+1:]))
		return retryLater{fmt.Errorf("%s got no answer; %d document(s) applied before it, %d not applied after it", refused.Name(), done, len(docs)-done-1)}
	}
	fmt.Fprintf(stderr, "not %s: %s (refused)", verb, refused.Name())
	if rest := docs[done+1:]; len(rest) > 0 {
		fmt.Fprintf(stderr, ", %s", names(rest))
	}
	fmt.Fprintln(stderr)
	if *dryRun {
		return fmt.Errorf("%d problem(s) in %s; nothing was changed (dry run)", len(problems), refused.Name())
	}
	return fmt.Errorf("%d problem(s) in %s; %d document(s) applied before it, %d not applied", len(problems), refused.Name(), done, len(docs)-done)
}

// exitRetry is apply's exit status when Relais could not be reached or
// gave no answer: EX_TEMPFAIL, so that a pipeline retries it later rather
// than blame the documents (apply is idempotent).
const exitRetry = 75

// retryLater is an apply that failed for Relais's absence, not its
// documents: the command exits exitRetry.
// apiClient is a client of the API at RELAIS_URL (default
// http://127.0.0.1:8080) with RELAIS_TOKEN, which must be role's: the
// commands that speak the API (apply, consumer) read them alike.
func apiClient(getenv func(string) string, stderr io.Writer, role string) (*apply.Client, error) {
	if err := checkEnvironment(config.ApplyVariables(), nil, func(w string) { fmt.Fprintln(stderr, "warning: "+w) }); err != nil {
		return nil, err
	}
	base := getenv("RELAIS_URL")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	if err := checkBaseURL(base); err != nil {
		return nil, err
	}
	// A token never holds white space: a secret file's or a variable's
	// trailing newline is taken off, where it made every request fail
	// blamed on RELAIS_URL (net/http refuses the header).
	token := strings.TrimSpace(getenv("RELAIS_TOKEN"))
	if token == "" {
		return nil, fmt.Errorf("RELAIS_TOKEN is required (%s)", role)
	}
	if strings.ContainsFunc(token, func(r rune) bool { return r < ' ' || r == 0x7f || r == ' ' }) {
		return nil, errors.New("RELAIS_TOKEN holds white space or a control character inside it: it is not a Relais token (rls_…)")
	}
	return &apply.Client{URL: base, Token: token}, nil
}

type retryLater struct{ error }

func (e retryLater) Unwrap() error { return e.error }

// ExitCode is the command's exit status.
func (retryLater) ExitCode() int { return exitRetry }

// names lists documents by name, or says there are none.
func names(docs []apply.Document) string {
	if len(docs) == 0 {
		return "none"
	}
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = d.Name()
	}
	return strings.Join(out, ", ")
}

// pathList is apply's -f, which may be repeated (as kubectl's).
type pathList []string

func (p *pathList) String() string { return strings.Join(*p, ", ") }

func (p *pathList) Set(v string) error {
	if v == "" {
		return errors.New("a file or folder is required")
	}
	*p = append(*p, v)
	return nil
}

// checkBaseURL refuses the usual slips in RELAIS_URL before anything is
// sent: a URL without its scheme (which Go's parser reads as a path), or
// one ending in /api/v1, which apply adds itself (the README's curl
// samples write $RELAIS_URL/api/v1/...), or in /console.
func checkBaseURL(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("RELAIS_URL %q must be an absolute http or https URL, as http://127.0.0.1:8080", base)
	}
	if p := strings.TrimRight(u.Path, "/"); strings.HasSuffix(p, "/api/v1") || strings.HasSuffix(p, "/console") {
		// Only a path ending in the API's own, or the console's (the
		// README sends users to $RELAIS_URL/console): a gateway may serve
		// Relais under a prefix of its own (https://gw.example/api/v1/relais).
		return fmt.Errorf("RELAIS_URL %q must be Relais's base URL, without %s (apply adds the paths it calls)", base, u.Path)
	}
	return nil
}
