package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/fault"
)

// workersPath lists the live workers.
const workersPath = basePath + "/workers"

// workersPageSize is the workers page's page size.
const workersPageSize = 100

// workerRow is one live worker.
type workerRow struct {
	WorkerID    string
	Consumer    string
	Protocol    string
	Definitions []workerDefinition
	InFlight    string
	// Lapsed counts the locks it let lapse within the hour ("" for none),
	// LastLapsed the latest.
	Lapsed     string
	LastLapsed timeView
	Connected  timeView
	LastSeen   timeView
	Replica    string
}

// workerDefinition is a definition a worker serves and the revisions it
// takes of it.
type workerDefinition struct {
	Key, Href, Revisions string
}

// lapseRow is a worker id that let locks lapse within the hour.
type lapseRow struct {
	WorkerID, Consumer, Lapsed, Live string
	Last                             timeView
}

// lapsesView lists the worker ids that let locks lapse within the hour,
// connected now or not.
type lapsesView struct {
	Title, Intro, Caption                string
	HeadWorker, HeadConsumer, HeadLapsed string
	HeadLast, HeadLive                   string
	Rows                                 []lapseRow
	// More says how many ids are not shown ("" when all are).
	More string
}

// lapsesShown bounds the worker ids the lapses table lists.
const lapsesShown = 20

// workerListView is the Workers page: who serves which definitions now.
type workerListView struct {
	Chrome                                                                chrome
	Intro, LapsedHint, Scope, ScopeHref, AllWorkers                       string
	Caption                                                               string
	HeadWorker, HeadConsumer, HeadProtocol, HeadDefinitions, HeadInFlight string
	HeadLapsed, HeadConnected, HeadLastSeen, HeadReplica                  string
	// LastLapsed prefixes a worker's latest lapse ("last").
	LastLapsed string
	Rows       []workerRow
	Empty      string
	Pager      pagerView
	// Errors say why the page lists nothing: parameters it cannot read.
	Errors []string
	// Lapses lists the worker ids that let locks lapse within the hour
	// (nil: none did).
	Lapses *lapsesView
}

// workerList lists live workers (streams and pollers), of one definition
// with ?definition=, keyset-paginated by ?after=.
func (c *Console) workerList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	f := engine.WorkerFilter{Definition: strings.TrimSpace(q.Get("definition")), Limit: workersPageSize + 1}
	errs := queryProblems(ctx, r.URL.RawQuery, "definition", "after")
	if a := q.Get("after"); a != "" {
		id, err := uuid.Parse(a)
		if err != nil {
			errs = append(errs, invalidCursor(ctx))
		}
		f.After = &id
	}
	v := workerListView{
		Chrome:     c.chrome(r, T(ctx, "Workers"), "workers"),
		Intro:      T(ctx, "Workers connected by a stream, and polling workers by their last fetch. A worker is listed while it was seen within three heartbeats."),
		Caption:    T(ctx, "Workers seen within three heartbeats"),
		HeadWorker: T(ctx, "Worker"), HeadConsumer: T(ctx, "Consumer"), HeadProtocol: T(ctx, "Protocol"),
		LapsedHint:      T(ctx, "Lapsed: the locks each worker id let lapse in the last hour."),
		HeadDefinitions: T(ctx, "Definitions served"), HeadInFlight: T(ctx, "In flight"),
		HeadLapsed: T(ctx, "Lapsed (1 h)"), LastLapsed: T(ctx, "last"),
		HeadConnected: T(ctx, "Connected"), HeadLastSeen: T(ctx, "Last seen"), HeadReplica: T(ctx, "Replica"),
		Empty:  T(ctx, "No worker is connected."),
		Pager:  newPager(ctx),
		Errors: errs,
	}
	if f.Definition != "" {
		v.Scope = T(ctx, "Workers serving %s", f.Definition)
		v.ScopeHref, v.AllWorkers = workersPath, T(ctx, "All workers")
		v.Empty = T(ctx, "No worker serves this definition.")
	}
	if len(errs) > 0 {
		c.render(w, r, http.StatusBadRequest, workerListPage(v))
		return
	}
	if f.Definition != "" {
		// A misspelt key listed no worker, read as "nobody serves it"
		// (verifier QA); the API answers 404 too.
		if _, err := c.eng.FindDefinition(ctx, f.Definition); fault.HasCode(err, "not_found") {
			key := f.Definition
			v.Errors = []string{T(ctx, "No definition has the key “%s”.", key)}
			c.render(w, r, http.StatusNotFound, workerListPage(v))
			return
		} else if err != nil {
			c.serverError(w, r, err)
			return
		}
	}
	workers, err := c.eng.ListWorkers(ctx, f)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	if len(workers) > workersPageSize {
		workers = workers[:workersPageSize]
		next := url.Values{"after": {workers[len(workers)-1].ID.String()}}
		if f.Definition != "" {
			next.Set("definition", f.Definition)
		}
		v.Pager.NextHref = workersPath + "?" + next.Encode()
	}
	if v.Lapses, err = c.lapses(ctx, f.Definition); err != nil {
		c.serverError(w, r, err)
		return
	}
	fitting := c.fittingRevisions(ctx)
	for _, wk := range workers {
		row := workerRow{WorkerID: wk.WorkerID, Consumer: wk.ConsumerName, Protocol: protocolLabel(ctx, wk.Protocol, wk.Transport),
			InFlight: number(ctx, wk.InFlight), Connected: formatTime(ctx, wk.ConnectedAt), LastSeen: formatTime(ctx, wk.LastSeenAt),
			Replica: wk.Replica}
		if wk.Lapsed > 0 {
			row.Lapsed, row.LastLapsed = number(ctx, wk.Lapsed), formatTime(ctx, wk.LastLapsedAt)
		}
		for _, k := range wk.Definitions {
			every, revs := revisionsTaken(wk.Subscriptions, k, fitting)
			text := revisionsText(ctx, every, revs)
			if every {
				// The numbers, as the grant makes them now (evolution
				// QA: "every revision its consumer is granted" did not
				// say whether the new one is among them).
				if granted, err := c.eng.GrantedRevisions(ctx, wk.ConsumerID, k); err == nil && len(granted) > 0 {
					numbers := engine.RevisionRanges(granted)
					text = T(ctx, "every revision its consumer is granted: %s", numbers)
				}
			}
			row.Definitions = append(row.Definitions, workerDefinition{Key: k, Href: definitionHref(k), Revisions: text})
		}
		v.Rows = append(v.Rows, row)
	}
	c.render(w, r, http.StatusOK, workerListPage(v))
}

// lapses is the Workers page's table of the worker ids that let locks
// lapse within the hour (of definition, when given), connected now or
// not: a worker that dies and restarts leaves the catalog between its
// lives, and one taking a new id at each start leaves ids behind (SDK QA:
// the live rows alone showed nothing of a crash loop). Nil when none did.
func (c *Console) lapses(ctx context.Context, definition string) (*lapsesView, error) {
	rows, total, err := c.eng.RecentLapses(ctx, definition, lapsesShown)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	v := &lapsesView{
		Title:      T(ctx, "Locks lapsed in the last hour"),
		Intro:      T(ctx, "Tasks whose lock expired unsettled, or whose worker stream ended while it held them, by the worker id that held them, connected now or not: a worker that dies, hangs, or loses Relais for longer than its lock. Each lapse counts as an attempt: the task is offered again while it has attempts left."),
		Caption:    T(ctx, "Worker ids that let locks lapse in the last hour"),
		HeadWorker: T(ctx, "Worker"), HeadConsumer: T(ctx, "Consumer"), HeadLapsed: T(ctx, "Locks lapsed"),
		HeadLast: T(ctx, "Last lapse"), HeadLive: T(ctx, "Connected now"),
	}
	for _, l := range rows {
		live := T(ctx, "no")
		if l.Live {
			live = T(ctx, "yes")
		}
		v.Rows = append(v.Rows, lapseRow{WorkerID: l.WorkerID, Consumer: l.ConsumerName, Lapsed: number(ctx, l.Lapsed), Live: live,
			Last: formatTime(ctx, l.LastLapsedAt)})
	}
	if more := total - len(rows); more > 0 {
		v.More = T(ctx, "And %d more worker ids, not listed: those above let the most locks lapse.", more)
	}
	return v, nil
}

// protocolLabel names a worker's protocol, and a stream's wire protocol
// after it when the catalog has it: "stream (gRPC-Web)".
func protocolLabel(ctx context.Context, p, transport string) string {
	switch p {
	case engine.ProtocolStream:
		if name := transportName(transport); name != "" {
			return T(ctx, "stream") + " (" + name + ")"
		}
		return T(ctx, "stream")
	case engine.ProtocolLongPoll:
		return T(ctx, "long polling")
	case engine.ProtocolCamunda:
		return T(ctx, "Camunda 7 facade")
	}
	return p
}

// transportName is a stream's wire protocol as its documentation names
// it (a name, the same in every language); "" when unknown.
func transportName(t string) string {
	switch t {
	case engine.TransportGRPC:
		return "gRPC"
	case engine.TransportGRPCWeb:
		return "gRPC-Web"
	case engine.TransportConnect:
		return "Connect"
	}
	return ""
}

// revisionsTaken is what a worker's subscriptions take of the definition
// key: every revision its consumer is granted (a subscription naming no
// revision, or a pattern, without declared fields), or the revisions
// listed, or, for one declaring fields, those whose inputs have them
// (fitting), in order.
func revisionsTaken(subs []engine.Subscription, key string, fitting func(key string, fields []string) []int) (every bool, revs []int) {
	add := func(rs []int) {
		for _, r := range rs {
			if !slices.Contains(revs, r) {
				revs = append(revs, r)
			}
		}
	}
	for _, s := range subs {
		if !engine.KeyMatches(s.Definition, key) {
			continue
		}
		switch {
		case len(s.Revisions) > 0 && !engine.IsKeyPattern(s.Definition):
			add(s.Revisions)
		case len(s.Fields) == 0:
			return true, nil
		default:
			add(fitting(key, s.Fields))
		}
	}
	slices.Sort(revs)
	return false, revs
}

// fittingRevisions returns a function giving the revisions of a definition
// whose inputs have every field declared, as a fetch resolves a
// subscription declaring fields: a worker taking "every revision" takes
// only those. Each definition's revisions are read once.
func (c *Console) fittingRevisions(ctx context.Context) func(key string, fields []string) []int {
	read := map[string][]engine.Revision{}
	return func(key string, fields []string) []int {
		revs, ok := read[key]
		if !ok {
			var err error
			if revs, err = c.eng.ListRevisions(ctx, key); err != nil {
				c.logger.Warn("console: revisions unavailable", "definition", key, "err", err)
			}
			read[key] = revs
		}
		var fit []int
		for _, r := range revs {
			if len(r.Working.Inputs.LacksFields(fields)) == 0 {
				fit = append(fit, r.Revision)
			}
		}
		return fit
	}
}

// revisionsText says which revisions a worker takes ("revisions 1, 2").
func revisionsText(ctx context.Context, every bool, revs []int) string {
	switch {
	case every || len(revs) == 0:
		return T(ctx, "every revision its consumer is granted")
	case len(revs) == 1:
		revision := revs[0]
		return T(ctx, "revision %d", revision)
	}
	revisions := joinInts(revs)
	return T(ctx, "revisions %s", revisions)
}

// joinInts writes numbers separated by commas.
func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// servedBy is what a definition page says of the workers serving it.
type servedBy struct {
	Count int
	Text  string
	// Revisions says which revisions they take (empty when none serves).
	Revisions string
	Href      string // the Workers page, for operators
	Warning   bool
	// Untaken warns of revisions whose occurrences wait while the live
	// workers take other revisions only.
	Untaken string
}

// fullStop ends the count's sentence when the revisions' follows.
func (s servedBy) fullStop() string {
	if s.Revisions == "" {
		return ""
	}
	return "."
}

// untakenText says that revisions' occurrences wait and no live worker
// takes them; short, for the Health page's row, or with what to do.
func untakenText(ctx context.Context, revs []int, short bool) string {
	switch {
	case len(revs) == 0:
		return ""
	case short && len(revs) == 1:
		revision := revs[0]
		return T(ctx, "no worker takes revision %d", revision)
	case short:
		revisions := joinInts(revs)
		return T(ctx, "no worker takes revisions %s", revisions)
	case len(revs) == 1:
		revision := revs[0]
		return T(ctx, "Occurrences of revision %d wait, and no live worker takes it: subscribe workers to it, with their consumers granted it (a worker naming no revision takes those its consumer is granted; a process version pins it).", revision)
	default:
		revisions := joinInts(revs)
		return T(ctx, "Occurrences of revisions %s wait, and no live worker takes them: subscribe workers to them, with their consumers granted them (a worker naming no revision takes those its consumer is granted; a process version pins them).", revisions)
	}
}

// workersServingMax bounds the workers a definition page reads to say
// which revisions they take; the count itself is exact.
const workersServingMax = 500

// workersServing counts the live workers of a definition. Designers read
// definitions but not the Workers page: they get the count without a link.
func (c *Console) workersServing(ctx context.Context, key string, operator bool) (servedBy, error) {
	n, err := c.eng.CountWorkers(ctx, key)
	if err != nil {
		return servedBy{}, err
	}
	s := servedBy{Count: n}
	if n == 0 {
		// A warning only when work waits for a worker: a definition only
		// push nodes use never has any.
		waits, err := c.eng.PullWorkWaits(ctx, key)
		if err != nil {
			return servedBy{}, err
		}
		use := engine.DefinitionUse{Pulled: true}
		if !waits {
			if use, err = c.eng.DefinitionUse(ctx, key); err != nil {
				return servedBy{}, err
			}
		}
		switch {
		case waits:
			s.Warning = true
			s.Text = T(ctx, "No worker serves this definition: its occurrences wait until one connects or polls.")
		case !use.Pulled && !use.Pushed:
			s.Text = T(ctx, "No process uses this definition yet: it needs a worker once a process pulls it.")
		case !use.Pulled:
			s.Text = T(ctx, "No process pulls this definition: Relais calls its destinations (push), and it needs no worker.")
		default:
			s.Text = T(ctx, "No worker is connected for this definition; none of its occurrences waits for one.")
		}
	} else {
		s.Text = T(ctx, "Served by %d workers", n)
		// Workers may take only some revisions: say which, so that a
		// revision with work and nobody to take it shows.
		workers, err := c.eng.ListWorkers(ctx, engine.WorkerFilter{Definition: key, Limit: workersServingMax})
		if err != nil {
			return servedBy{}, err
		}
		every, revs := false, []int{}
		fitting := c.fittingRevisions(ctx)
		for _, wk := range workers {
			e, rs := revisionsTaken(wk.Subscriptions, key, fitting)
			if e {
				// The numbers its grant makes now, beside "every".
				if granted, err := c.eng.GrantedRevisions(ctx, wk.ConsumerID, key); err == nil {
					rs = granted
				}
			}
			every = every || e
			for _, r := range rs {
				if !slices.Contains(revs, r) {
					revs = append(revs, r)
				}
			}
		}
		revisions := engine.RevisionRanges(revs)
		one := n == 1
		switch {
		case every && one && len(revs) > 0:
			s.Revisions = T(ctx, "It takes every revision its consumer is granted: %s.", revisions)
		case every && one:
			s.Revisions = T(ctx, "It takes every revision its consumer is granted.")
		case every && len(revs) > 0:
			s.Revisions = T(ctx, "Revisions they take: %s; some take every revision their consumer is granted.", revisions)
		case every:
			s.Revisions = T(ctx, "They take every revision their consumer is granted.")
		case len(revs) == 1 && one:
			revision := revs[0]
			s.Revisions = T(ctx, "It takes revision %d only.", revision)
		case len(revs) == 1:
			revision := revs[0]
			s.Revisions = T(ctx, "They take revision %d only.", revision)
		case one:
			s.Revisions = T(ctx, "It takes revisions %s only.", revisions)
		default:
			s.Revisions = T(ctx, "They take revisions %s only.", revisions)
		}
		untaken, err := c.eng.RevisionsWithoutTaker(ctx)
		if err != nil {
			return servedBy{}, err
		}
		s.Untaken = untakenText(ctx, untaken[key], false)
	}
	if operator {
		s.Href = workersHref(key)
	}
	return s, nil
}
