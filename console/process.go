package console

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/snapshot"
)

// processRow is one process of the list.
type processRow struct {
	Key, Href, Latest, Created string
	Versions                   []processVersionLink
}

type processVersionLink struct {
	Label, Href string
}

// processListView lists processes.
type processListView struct {
	Chrome                                       chrome
	Intro, Caption, HeadKey, HeadVersions, Empty string
	Rows                                         []processRow
	Pager                                        pagerView
	// Errors say why the page lists nothing: parameters it cannot read.
	Errors []string
}

// seesCounts reports whether the session may see occurrences counted by
// node: operational data, for operators and admins (a designer reads the
// versions themselves).
func seesCounts(ctx context.Context) bool {
	p, ok := auth.FromContext(ctx)
	return ok && auth.Allowed(p.Role, auth.RoleOperator)
}

// maxVersionLinks bounds the version links a process row shows (the
// newest ones).
const maxVersionLinks = 10

// processList lists processes by key, each with links to its newest
// versions.
func (c *Console) processList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	after := r.URL.Query().Get("after")
	errs := append(queryProblems(ctx, r.URL.RawQuery, "after"), keyCursorProblems(ctx, after)...)
	intro := T(ctx, "Published process versions: their nodes, routes and pinned revisions, drawn, with where their occurrences are now.")
	if !seesCounts(ctx) {
		intro = T(ctx, "Published process versions: their nodes, routes and pinned revisions, drawn.")
	}
	v := processListView{Chrome: c.chrome(r, T(ctx, "Processes"), "processes"),
		Intro:   intro,
		Caption: T(ctx, "Processes by key"), HeadKey: T(ctx, "Key"), HeadVersions: T(ctx, "Versions, newest first"),
		Empty: T(ctx, "No process is published yet."), Pager: newPager(ctx), Errors: errs}
	if len(errs) > 0 {
		c.render(w, r, http.StatusBadRequest, processListPage(v))
		return
	}
	procs, err := c.eng.ListProcesses(ctx, after, definitionsPageSize+1)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	more := len(procs) > definitionsPageSize
	if more {
		procs = procs[:definitionsPageSize]
	}
	for _, p := range procs {
		row := processRow{Key: p.Key}
		n := p.LatestVersion
		for ; n >= 1 && n > p.LatestVersion-maxVersionLinks; n-- {
			row.Versions = append(row.Versions, processVersionLink{Label: T(ctx, "version %d", n), Href: processVersionHref(p.Key, n)})
		}
		if n >= 1 {
			// The older ones, which instances may still run (evolution
			// QA: version 1 of 11 had no link): each version's page links
			// the one before.
			row.Versions = append(row.Versions, processVersionLink{Label: T(ctx, "older versions, from version %d (each links the one before)", n),
				Href: processVersionHref(p.Key, n)})
		}
		v.Rows = append(v.Rows, row)
	}
	if more {
		v.Pager.NextHref = processesPath + "?after=" + url.QueryEscape(procs[len(procs)-1].Key)
	}
	c.render(w, r, http.StatusOK, processListPage(v))
}

// nodeRow is one node of a process version, as its table lists it.
type nodeRow struct {
	Name, Anchor, Kind, Definition, DefinitionHref string
	Routes                                         []string
	OnError                                        []string
	Policy                                         string
	// PolicyWarning says what in the policy can never work as written.
	PolicyWarning string
	// Bindings say what feeds each input of the pinned revision.
	Bindings []string
	Counts   []statusCount
	Start    bool
}

// maxGraphNodes bounds the process versions the console draws.
const maxGraphNodes = 300

// processVersionView is a process version page.
type processVersionView struct {
	Chrome                 chrome
	Summary                []fact
	GraphLabel, GraphIntro string
	// GraphTooBig, when set, says why no graph is drawn.
	GraphTooBig                                                                         string
	Graph                                                                               graphView
	CountsNote, CountsMissing                                                           string
	NodesLabel, NodesCaption                                                            string
	HeadNode, HeadKind, HeadDefinition, HeadRoutes, HeadOnError, HeadPolicy, HeadCounts string
	HeadBindings                                                                        string
	Nodes                                                                               []nodeRow
	// Inputs is the contract instances of the version start with.
	Inputs                        contractTable
	InputsHeads                   contractHeads
	NoCounts                      string
	InstancesHref, InstancesLabel string
	// Counts is whether the page shows occurrences by node: operational
	// data, for operators (a designer reads the version itself).
	Counts bool
	// Neighbours link the versions before and after this one.
	Neighbours []processVersionLink
}

// processVersion shows a process version, read-only: its graph drawn as
// SVG (nodes by depth, routes, error edges with their codes, hold) with
// each node's occurrences of this version by status, and the same as a
// table.
// processLatest sends a process's address (one a user shortens a version's
// to) to its latest version, the one a start without a version runs.
func (c *Console) processLatest(w http.ResponseWriter, r *http.Request) {
	pv, err := c.eng.GetProcessVersion(r.Context(), chi.URLParam(r, "key"), 0)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	http.Redirect(w, r, processVersionHref(pv.Key, pv.Version), http.StatusSeeOther)
}

func (c *Console) processVersion(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := chi.URLParam(r, "key")
	n, err := strconv.Atoi(chi.URLParam(r, "version"))
	if err != nil || n < 1 {
		c.notFound(w, r)
		return
	}
	pv, err := c.eng.GetProcessVersion(ctx, key, n)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	p := pv.Process
	name := processAtVersion(ctx, key, n)
	v := processVersionView{
		Chrome: c.liveChrome(r, T(ctx, "Process %s", name), "processes"),
		Summary: []fact{
			{Label: T(ctx, "Key"), Value: key, Code: true},
			{Label: T(ctx, "Version"), Value: strconv.Itoa(n), TestID: "version"},
			{Label: T(ctx, "Published"), Time: formatTime(ctx, pv.CreatedAt)},
			{Label: T(ctx, "Start node"), Value: p.Start, Code: true, TestID: "start-node"},
			{Label: T(ctx, "Digest"), Value: pv.Digest, Code: true},
		},
		GraphLabel: T(ctx, "Graph"),
		GraphIntro: T(ctx, "Columns follow the longest path from the start node. Solid arrows are successes (labelled with their route), dashed ones failures (labelled with their error codes). Each box says how many of this version’s occurrences are at that node now."),
		NodesLabel: T(ctx, "Nodes"), NodesCaption: T(ctx, "Nodes of this version, with their occurrences now"),
		HeadNode: T(ctx, "Node"), HeadKind: T(ctx, "Kind"), HeadDefinition: T(ctx, "Pinned revision"), HeadRoutes: T(ctx, "On success"),
		HeadOnError: T(ctx, "On error"), HeadPolicy: T(ctx, "Policy"), HeadCounts: T(ctx, "Occurrences now"),
		HeadBindings: T(ctx, "Inputs from"),
		NoCounts:     T(ctx, "none"),
		Inputs: contractTable{Title: T(ctx, "Inputs"), TestID: "process-inputs", Empty: T(ctx, "No inputs: an instance starts with an empty object."),
			Caption: T(ctx, "Inputs an instance of this version is started with"), Rows: contractRows(ctx, p.Inputs, "")},
		InputsHeads: contractHeads{Field: T(ctx, "Field"), Type: T(ctx, "Type"), Required: T(ctx, "Required"),
			Classification: T(ctx, "Classification"), Constraints: T(ctx, "Constraints"), Description: T(ctx, "Description")},
		InstancesHref:  instanceFilter{Process: key, Version: strconv.Itoa(n)}.href(),
		InstancesLabel: T(ctx, "Instances of this version"),
	}
	if p.Name != "" {
		v.Summary = append(v.Summary, fact{Label: T(ctx, "Name"), Value: visibleBidi(p.Name)})
	}
	if p.Description != "" {
		// What tells a rollback from a roll-forward, whose documents
		// may otherwise be the same (evolution QA).
		v.Summary = append(v.Summary, fact{Label: T(ctx, "Description"), Value: visibleBidi(p.Description), TestID: "description"})
	}
	if latest, err := c.eng.GetProcessVersion(ctx, key, 0); err == nil {
		if latest.Version == n {
			v.Summary = append(v.Summary, fact{Label: T(ctx, "Latest"), Value: T(ctx, "yes: a start that names no version runs this one"), TestID: "latest"})
		} else {
			v.Summary = append(v.Summary, fact{Label: T(ctx, "Latest"), Value: T(ctx, "no: the latest is version %d", latest.Version),
				Href: processVersionHref(key, latest.Version), TestID: "latest"})
		}
		if n > 1 {
			v.Neighbours = append(v.Neighbours, processVersionLink{Label: T(ctx, "← version %d", n-1), Href: processVersionHref(key, n-1)})
		}
		if n < latest.Version {
			v.Neighbours = append(v.Neighbours, processVersionLink{Label: T(ctx, "version %d →", n+1), Href: processVersionHref(key, n+1)})
		}
	}
	byNode := map[string]map[string]int64{}
	if seesCounts(ctx) {
		v.Counts = true
		byNode = c.versionCountsByNode(ctx, key, n, &v)
	} else {
		// Instances and their counts are for operators, as in the API: a
		// designer reads the version itself.
		v.InstancesHref = ""
		v.GraphIntro = T(ctx, "Columns follow the longest path from the start node. Solid arrows are successes (labelled with their route), dashed ones failures (labelled with their error codes).")
		v.NodesCaption = T(ctx, "Nodes of this version")
	}
	lines := map[string][]string{}
	// held counts the incidents of every node, for the hold's box, where
	// the graph's failure edges lead.
	var held int64
	for node, byStatus := range byNode {
		var open, done []string
		for _, s := range occurrenceStatuses {
			if cnt := byStatus[s]; cnt > 0 {
				part := statusLabel(ctx, s) + " " + number(ctx, cnt)
				if settled(s) {
					done = append(done, part)
				} else {
					open = append(open, part)
				}
			}
		}
		for _, l := range [][]string{open, done} {
			if len(l) > 0 {
				lines[node] = append(lines[node], strings.Join(l, " · "))
			}
		}
		if n := byStatus[engine.InstanceHeld]; n > 0 {
			lines[node] = append(lines[node], heldLine(ctx, n))
			held += n
		}
	}
	if held > 0 {
		lines[process.Hold] = []string{heldLine(ctx, held)}
	}
	if len(p.Nodes) > maxGraphNodes {
		// Laying out takes more than linear time, and a drawing thousands
		// of boxes wide shows nothing: the table below lists them all.
		v.GraphTooBig = T(ctx, "This version has %d nodes: too many to draw legibly (at most %d). The table below lists every node with its routes and counts.", len(p.Nodes), maxGraphNodes)
		if !v.Counts {
			v.GraphTooBig = T(ctx, "This version has %d nodes: too many to draw legibly (at most %d). The table below lists every node with its routes.", len(p.Nodes), maxGraphNodes)
		}
	} else {
		v.Graph = graphOf(ctx, p, lines)
		v.Graph.Title = elided(ctx, T(ctx, "Graph of %s", name), name)
		v.Graph.Desc = T(ctx, "%d nodes, starting at %s. The table below lists the same nodes, routes and counts.", len(p.Nodes), p.Start)
		if !v.Counts {
			v.Graph.Desc = T(ctx, "%d nodes, starting at %s. The table below lists the same nodes and routes.", len(p.Nodes), p.Start)
		}
		v.Graph.Desc = elided(ctx, v.Graph.Desc, p.Start)
	}
	lim := c.eng.ProcessLimits()
	for _, node := range slices.Sorted(maps.Keys(p.Nodes)) {
		v.Nodes = append(v.Nodes, nodeRowOf(ctx, p, node, byNode[node], key, lim))
	}
	// The start node first, then by name.
	slices.SortStableFunc(v.Nodes, func(a, b nodeRow) int {
		switch {
		case a.Start == b.Start:
			return 0
		case a.Start:
			return -1
		}
		return 1
	})
	c.render(w, r, http.StatusOK, processVersionPage(v))
}

func nodeRowOf(ctx context.Context, p *process.Process, name string, byStatus map[string]int64, key string, lim process.Limits) nodeRow {
	n := p.Nodes[name]
	row := nodeRow{Name: name, Anchor: "node-" + name, Start: name == p.Start}
	switch n.Kind {
	case process.KindPull:
		row.Kind = T(ctx, "pull")
	case process.KindPush:
		row.Kind = T(ctx, "push to %s", n.Destination)
	case process.KindEnd:
		row.Kind = T(ctx, "end (completes)")
		if n.Status == process.StatusFailed {
			row.Kind = T(ctx, "end (fails)")
		}
	}
	if n.Definition != "" {
		row.Definition = definitionAtRevision(ctx, n.Definition, n.Revision)
		row.DefinitionHref = revisionHref(n.Definition, n.Revision)
	}
	for _, field := range slices.Sorted(maps.Keys(n.Inputs)) {
		b := n.Inputs[field]
		if b.From != "" {
			from := b.From
			row.Bindings = append(row.Bindings, T(ctx, "%s ← %s", field, from))
		} else {
			// A literal is part of the version document: never a
			// sensitive or secret target's (process.Check refuses it).
			value := string(b.Value)
			row.Bindings = append(row.Bindings, T(ctx, "%s = %s", field, value))
		}
	}
	for _, route := range slices.Sorted(maps.Keys(n.Routes)) {
		target := n.Routes[route]
		row.Routes = append(row.Routes, T(ctx, "%s → %s", route, target))
	}
	if n.Next != "" {
		next := n.Next
		row.Routes = append(row.Routes, T(ctx, "→ %s", next))
	}
	targetName := func(t string) string {
		if t == process.Hold {
			return T(ctx, "hold (an incident for an operator)")
		}
		return t
	}
	codes := n.OnError.Codes
	for _, code := range slices.Sorted(maps.Keys(codes)) {
		if code == process.AnyCode {
			continue
		}
		route, target := code, targetName(codes[code])
		row.OnError = append(row.OnError, T(ctx, "%s → %s", route, target))
	}
	if d := n.OnError.Default; d != "" {
		next := targetName(d)
		if codes != nil {
			row.OnError = append(row.OnError, T(ctx, "any other code → %s", next))
		} else {
			row.OnError = append(row.OnError, T(ctx, "→ %s", next))
		}
	}
	if n.Kind != process.KindEnd && n.OnError.IsZero() {
		row.OnError = append(row.OnError, T(ctx, "fails the instance"))
	}
	if n.Kind == process.KindPull {
		var ceiling *time.Duration
		if n.Policy.MaxRetryDelay > 0 {
			ceiling = &n.Policy.MaxRetryDelay
		}
		retryDelay := retryDelayText(ctx, n.Policy.RetryDelay, n.Policy.Backoff(), ceiling, lim.MaxRetryDelay)
		row.Policy = T(ctx, "%d attempts, retry after %s, priority %d", n.Policy.MaxAttempts, retryDelay, n.Policy.Priority)
		if n.Policy.MaxAttempts == 1 {
			// No retry to wait for: a delay would say there is one.
			row.Policy = T(ctx, "one attempt, no retry, priority %d", n.Policy.Priority)
		}
		if n.Policy.Deadline > 0 {
			deadline := formatDuration(ctx, n.Policy.Deadline)
			row.Policy = semicolonList(ctx, []string{row.Policy, T(ctx, "deadline %s", deadline)})
		}
		if n.RetriesFutile() {
			// As relais apply warns (evolution QA: the page showed the
			// policy without a word).
			row.PolicyWarning = T(ctx, "No retry can run: the deadline ends the occurrence before its retry delay passes.")
		}
	} else if n.Kind == process.KindPush {
		timeout := formatDuration(ctx, n.PushTimeout(lim))
		row.Policy = T(ctx, "timeout %s", timeout)
		if n.Timeout == 0 {
			// The node sets none: the configured default applies.
			row.Policy = T(ctx, "timeout %s (the default)", timeout)
		}
		if n.Policy.Deadline > 0 {
			deadline := formatDuration(ctx, n.Policy.Deadline)
			row.Policy = semicolonList(ctx, []string{row.Policy, T(ctx, "deadline %s", deadline)})
		}
		if n.CallOutlastsDeadline() {
			row.PolicyWarning = T(ctx, "The call may last past the deadline, which cuts it short (deadline_exceeded).")
		}
	}
	for _, s := range occurrenceStatuses {
		if cnt := byStatus[s]; cnt > 0 {
			row.Counts = append(row.Counts, statusCount{Status: s, Label: statusLabel(ctx, s), Count: number(ctx, cnt)})
		}
	}
	if cnt := byStatus[engine.InstanceHeld]; cnt > 0 {
		row.Counts = append(row.Counts, statusCount{Status: engine.InstanceHeld, Label: T(ctx, "instances held"), Count: number(ctx, cnt)})
	}
	return row
}

// heldLine is a graph box's line for n held instances.
func heldLine(ctx context.Context, n int64) string {
	count := number(ctx, n)
	return T(ctx, "instances held: %s", count)
}

// versionCountsByNode reads the version's occurrences by node and status
// (cached a few seconds), saying on v when they were counted or that they
// could not be.
func (c *Console) versionCountsByNode(ctx context.Context, key string, n int, v *processVersionView) map[string]map[string]int64 {
	byNode := map[string]map[string]int64{}
	counts, at, err := c.nodeCounts.get(ctx, key, n)
	if err != nil {
		c.logger.Warn("console: node counts unavailable", "err", err)
		v.CountsMissing = T(ctx, "Counts are unavailable right now.")
		return byNode
	}
	for _, nc := range counts {
		if byNode[nc.Node] == nil {
			byNode[nc.Node] = map[string]int64{}
		}
		byNode[nc.Node][nc.Status] = nc.Count
	}
	when := formatTime(ctx, at)
	v.CountsNote = T(ctx, "Counts as of %s (%s); recounted every few seconds, shown anew at each reload.", when.Text, when.Rel)
	return byNode
}

// versionCounts caches each process version's node counts like the
// counts by status: a count reads every occurrence of the version.
type versionCounts struct {
	eng    *engine.Engine
	c      *Console
	mu     sync.Mutex
	caches map[string]*snapshot.Cache[[]engine.NodeCount]
}

// maxVersionCaches bounds the versions whose counts are kept; past it the
// caches start over (a console looks at a handful of versions at a time).
const maxVersionCaches = 256

func (vc *versionCounts) get(ctx context.Context, key string, version int) ([]engine.NodeCount, time.Time, error) {
	id := key + "\x00" + strconv.Itoa(version)
	vc.mu.Lock()
	if vc.caches == nil || len(vc.caches) >= maxVersionCaches {
		vc.caches = map[string]*snapshot.Cache[[]engine.NodeCount]{}
	}
	sc := vc.caches[id]
	if sc == nil {
		sc = snapshot.New("console node counts", func(ctx context.Context) ([]engine.NodeCount, error) {
			return vc.eng.CountOccurrencesByNode(ctx, key, version)
		}, vc.c.logger, countsTTL).StampWith(vc.eng.Now).QuietWhen(engine.PoolClosed)
		vc.caches[id] = sc
	}
	vc.mu.Unlock()
	// A person opens this page: after a quiet spell it waits a moment for
	// counts of now rather than show those of the last visit.
	return sc.Fresh(ctx)
}
