package console

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/contracts"
	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
)

// contractTable is one contract (inputs or outputs) as a table.
type contractTable struct {
	Title   string
	Caption string
	TestID  string
	Empty   string
	Rows    []contractRow
}

// revisionSection is one immutable revision.
type revisionSection struct {
	Anchor   string
	Title    string
	Facts    []fact
	Inputs   contractTable
	Outputs  contractTable
	Releases string
}

// releaseRow is one named publication.
type releaseRow struct {
	Name         string
	Revision     string
	RevisionHref string
	Notes        string
	Created      timeView
}

// changeRow is one difference between two revisions.
type changeRow struct {
	Path            string
	Kind            string
	Detail          string
	BreaksProcesses bool
	BreaksWorkers   bool
	Breaking        bool
	// Lowers: the change lowers the field's classification.
	Lowers  bool
	Yes, No string
}

// contractHeads are the column headers of contract tables.
type contractHeads struct {
	Field, Type, Required, Classification, Constraints, Description string
}

// definitionView is the design view of one definition.
type definitionView struct {
	Chrome chrome
	// ServedBy says which workers serve the definition now.
	ServedBy servedBy

	WorkingLabel, WorkingIntro string
	// Unsnapshotted says that the Working copy differs from the latest
	// revision (empty when it does not); Pending are those changes.
	Unsnapshotted, UnsnapshottedSummary, PendingCaption string
	Pending                                             []changeRow
	Working                                             []fact
	WorkingInputs                                       contractTable
	WorkingOutputs                                      contractTable
	Heads                                               contractHeads

	RevisionsLabel string
	NoRevisions    string
	Revisions      []revisionSection

	ReleasesLabel, NoReleases                         string
	HeadRelease, HeadRevision, HeadNotes, HeadCreated string
	ReleasesCaption, ChangesCaption                   string
	Releases                                          []releaseRow

	DiffLabel, DiffIntro, FromLabel, ToLabel, Compare string
	DiffAction                                        string
	FromOptions, ToOptions                            []option
	DiffError, DiffSummary, NoChanges                 string
	Diffed                                            bool
	HeadPath, HeadChange, HeadDetail                  string
	HeadBreaksProcesses, HeadBreaksWorkers            string
	Changes                                           []changeRow
}

// definitionDetail shows a definition's Working, every revision's
// contracts, its releases, and the diff between two chosen revisions
// (?from=&to=, a GET form so a comparison can be shared).
func (c *Console) definitionDetail(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := chi.URLParam(r, "key")
	def, err := c.eng.GetDefinition(ctx, key)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	revs, err := c.eng.ListRevisions(ctx, key)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	rels, err := c.eng.ListReleases(ctx, key)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	p, _ := auth.FromContext(ctx)
	served, err := c.workersServing(ctx, key, auth.Allowed(p.Role, auth.RoleOperator))
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	heads := contractHeads{Field: T(ctx, "Field"), Type: T(ctx, "Type"), Required: T(ctx, "Required"),
		Classification: T(ctx, "Classification"), Constraints: T(ctx, "Constraints"), Description: T(ctx, "Description")}
	v := definitionView{
		Chrome:       c.chrome(r, T(ctx, "Definition %s", key), "definitions"),
		ServedBy:     served,
		WorkingLabel: T(ctx, "Working copy"),
		WorkingIntro: T(ctx, "The only mutable part of a definition. Processes never use it directly: they pin a revision."),
		Working: []fact{
			{Label: T(ctx, "Name"), Value: visibleBidi(def.Working.Name), TestID: "working-name"},
			{Label: T(ctx, "Description"), Value: visibleBidi(def.Working.Description)},
			{Label: T(ctx, "Routing output"), Value: def.Working.RoutingOutput, Code: true},
			{Label: T(ctx, "Last saved"), Time: formatTime(ctx, def.UpdatedAt)},
		},
		Heads:          heads,
		RevisionsLabel: T(ctx, "Revisions"),
		NoRevisions:    T(ctx, "No revision yet: the Working copy has never been snapshotted."),
		ReleasesLabel:  T(ctx, "Releases"),
		NoReleases:     T(ctx, "No release yet."),
		HeadRelease:    T(ctx, "Release"), HeadRevision: T(ctx, "Revision"), HeadNotes: T(ctx, "Notes"), HeadCreated: T(ctx, "Published"),
		DiffLabel: T(ctx, "Compare revisions"),
		DiffIntro: T(ctx, "Lists every change from one revision to another, and whom it may break."),
		FromLabel: T(ctx, "From revision"), ToLabel: T(ctx, "To revision"), Compare: T(ctx, "Compare"),
		DiffAction: definitionHref(key) + "#diff",
		HeadPath:   T(ctx, "Field"), HeadChange: T(ctx, "Change"), HeadDetail: T(ctx, "Detail"),
		HeadBreaksProcesses: T(ctx, "Breaks processes"), HeadBreaksWorkers: T(ctx, "Breaks workers"),
		NoChanges: T(ctx, "These revisions have the same contracts."),
	}
	v.WorkingInputs = contractTable{Title: T(ctx, "Inputs"), TestID: "working-inputs", Empty: T(ctx, "No inputs."),
		Caption: T(ctx, "Inputs of the working copy"), Rows: contractRows(ctx, def.Working.Inputs, "")}
	v.WorkingOutputs = contractTable{Title: T(ctx, "Outputs"), TestID: "working-outputs", Empty: T(ctx, "No outputs."),
		Caption: T(ctx, "Outputs of the working copy"), Rows: contractRows(ctx, def.Working.Outputs, def.Working.RoutingOutput)}
	v.ReleasesCaption = T(ctx, "Releases, oldest first")
	v.ChangesCaption = T(ctx, "Changes between the two revisions")

	releasesOf := map[int][]string{}
	for _, rel := range rels {
		releasesOf[rel.Revision] = append(releasesOf[rel.Revision], rel.Name)
		v.Releases = append(v.Releases, releaseRow{Name: rel.Name, Revision: strconv.Itoa(rel.Revision),
			RevisionHref: "#revision-" + strconv.Itoa(rel.Revision), Notes: visibleBidi(rel.Notes), Created: formatTime(ctx, rel.CreatedAt)})
	}
	// Which process versions pin each revision (evolution QA: nothing
	// said who was still bound to an old one).
	pins, err := c.eng.DefinitionPins(ctx, key)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	// Newest first: the revision in use is usually the latest.
	for i := len(revs) - 1; i >= 0; i-- {
		rv := revs[i]
		sec := revisionSection{
			Anchor: "revision-" + strconv.Itoa(rv.Revision),
			Title:  T(ctx, "Revision %d", rv.Revision),
			Facts: []fact{
				{Label: T(ctx, "Name"), Value: visibleBidi(rv.Working.Name)},
				{Label: T(ctx, "Snapshotted"), Time: formatTime(ctx, rv.CreatedAt)},
				{Label: T(ctx, "Digest"), Value: rv.Digest, Code: true},
				{Label: T(ctx, "Routing output"), Value: rv.Working.RoutingOutput, Code: true},
				{Label: T(ctx, "Releases"), Value: strings.Join(releasesOf[rv.Revision], ", ")},
				pinnedByFact(ctx, pins[rv.Revision]),
			},
			Inputs: contractTable{Title: T(ctx, "Inputs"), TestID: "revision-inputs", Empty: T(ctx, "No inputs."),
				Caption: T(ctx, "Inputs of revision %d", rv.Revision), Rows: contractRows(ctx, rv.Working.Inputs, "")},
			Outputs: contractTable{Title: T(ctx, "Outputs"), TestID: "revision-outputs", Empty: T(ctx, "No outputs."),
				Caption: T(ctx, "Outputs of revision %d", rv.Revision), Rows: contractRows(ctx, rv.Working.Outputs, rv.Working.RoutingOutput)},
		}
		v.Revisions = append(v.Revisions, sec)
	}

	// What a snapshot would change: the API's unsnapshotted_changes.
	if n := len(revs); n > 0 && revs[n-1].Digest != def.WorkingDigest {
		latest, next := revs[n-1].Revision, revs[n-1].Revision+1
		v.Pending = changeRows(ctx, revs[n-1].Working, def.Working)
		v.Unsnapshotted = T(ctx, "The Working copy has changes not yet snapshotted: they are in no revision (workers and processes use revision %d at most) until a snapshot makes them revision %d.", latest, next)
		v.UnsnapshottedSummary = T(ctx, "Since revision %d:", latest) + " " + changeCounts(ctx, v.Pending)
		if len(v.Pending) == 0 {
			// Only a name or a description changed: the contracts are
			// the same.
			v.UnsnapshottedSummary = T(ctx, "Since revision %d:", latest) + " " + T(ctx, "the contracts are the same (the name or a description changed).")
		}
		v.PendingCaption = T(ctx, "Changes of the Working copy since revision %d", latest)
	}
	c.diff(ctx, r, &v, key, revs)
	status := http.StatusOK
	if v.DiffError != "" {
		status = http.StatusBadRequest // as the lists answer a filter they cannot apply
	}
	c.render(w, r, status, definitionPage(v))
}

// diff fills the comparison form and, when two revisions were chosen, the
// changes between them. By default it offers the two latest revisions.
func (c *Console) diff(ctx context.Context, r *http.Request, v *definitionView, key string, revs []engine.Revision) {
	q := r.URL.Query()
	from, to := q.Get("from"), q.Get("to")
	if len(revs) >= 2 && from == "" && to == "" {
		from, to = strconv.Itoa(revs[len(revs)-2].Revision), strconv.Itoa(revs[len(revs)-1].Revision)
	} else if len(revs) == 1 && from == "" && to == "" {
		from, to = "1", "1"
	}
	byNumber := map[int]engine.Revision{}
	for _, rv := range revs {
		n := strconv.Itoa(rv.Revision)
		byNumber[rv.Revision] = rv
		v.FromOptions = append(v.FromOptions, option{Value: n, Label: n, Selected: n == from})
		v.ToOptions = append(v.ToOptions, option{Value: n, Label: n, Selected: n == to})
	}
	// The page reads nothing else: another parameter (a misspelt one) is
	// said, not left to show the default comparison as if asked for.
	if errs := queryProblems(ctx, r.URL.RawQuery, "from", "to"); len(errs) > 0 {
		v.DiffError = strings.Join(errs, " ")
		return
	}
	if q.Get("from") == "" && q.Get("to") == "" {
		return
	}
	a, errA := strconv.Atoi(from)
	b, errB := strconv.Atoi(to)
	older, okA := byNumber[a]
	newer, okB := byNumber[b]
	if errA != nil || errB != nil || !okA || !okB {
		v.DiffError = T(ctx, "Choose two existing revisions to compare.")
		return
	}
	v.Diffed = true
	v.Changes = changeRows(ctx, older.Working, newer.Working)
	v.DiffSummary = T(ctx, "From revision %d to revision %d:", a, b) + " " + changeCounts(ctx, v.Changes)
}

// changeRows are the changes from older to newer contracts.
func changeRows(ctx context.Context, older, newer contracts.Working) []changeRow {
	var rows []changeRow
	for _, ch := range contracts.Diff(older, newer) {
		rows = append(rows, changeRow{Path: ch.Path, Kind: changeKindLabel(ctx, ch.Kind), Detail: describeChange(ctx, ch, older, newer),
			BreaksProcesses: ch.BreaksProcesses, BreaksWorkers: ch.BreaksWorkers,
			Breaking: ch.BreaksProcesses || ch.BreaksWorkers, Lowers: ch.LowersProtection, Yes: yesNo(ctx, true), No: yesNo(ctx, false)})
	}
	return rows
}

// loweredProtection names the changes of rows that lower a classification,
// "" when none does: it may break nobody, yet it is the one change a
// security review looks for, and a row among others hid it (designer QA;
// relais apply and the API's diff name it too).
func loweredProtection(ctx context.Context, rows []changeRow) string {
	var fields []string
	for _, r := range rows {
		if r.Lowers {
			fields = append(fields, r.Path+" ("+r.Detail+")")
		}
	}
	if len(fields) == 0 {
		return ""
	}
	return T(ctx, "Lowers protection: %s. Under the newer contract these fields’ values are less protected than under the older one.", strings.Join(fields, ", "))
}

// changeCounts says how many changes there are and how many break someone.
func changeCounts(ctx context.Context, rows []changeRow) string {
	changed, breaking := len(rows), 0
	for _, r := range rows {
		if r.Breaking {
			breaking++
		}
	}
	return T(ctx, "%d changes", changed) + ", " + T(ctx, "%d breaking", breaking)
}

// describeChange says what changed, in the request's language. The diff's
// own Detail is English for the API; the console rebuilds the sentence from
// the two revisions and the change's kind and path, and falls back to that
// Detail only for a change it cannot locate.
func describeChange(ctx context.Context, ch contracts.Change, older, newer contracts.Working) string {
	if ch.Kind == contracts.ChangeRoutingChanged {
		from, to := orNone(ctx, older.RoutingOutput), orNone(ctx, newer.RoutingOutput)
		return T(ctx, "routing output %s → %s", from, to)
	}
	section, path, ok := splitChangePath(ch.Path)
	if !ok {
		return ch.Detail
	}
	contract := func(w contracts.Working) contracts.Contract {
		if section == "inputs" {
			return w.Inputs
		}
		return w.Outputs
	}
	fa, ca, okA := contract(older).Lookup(path)
	fb, cb, okB := contract(newer).Lookup(path)
	switch ch.Kind {
	case contracts.ChangeAdded:
		if okB {
			return fieldSummary(ctx, fb, cb)
		}
	case contracts.ChangeRemoved:
		if okA {
			return fieldSummary(ctx, fa, ca)
		}
	case contracts.ChangeRequiredChanged:
		if okB && fb.Required {
			return T(ctx, "optional → required")
		} else if okB {
			return T(ctx, "required → optional")
		}
	case contracts.ChangeClassificationChanged:
		if okA && okB {
			return classLabel(ctx, ca) + " → " + classLabel(ctx, cb)
		}
	case contracts.ChangeTypeChanged:
		if okA && okB {
			return typeLabel(ctx, fa.Type) + " → " + typeLabel(ctx, fb.Type)
		}
	case contracts.ChangeChoicesChanged:
		if okA && okB {
			var parts []string
			if added := minus(fb.Values, fa.Values); len(added) > 0 {
				values := strings.Join(added, ", ")
				parts = append(parts, T(ctx, "values added: %s", values))
			}
			if removed := minus(fa.Values, fb.Values); len(removed) > 0 {
				values := strings.Join(removed, ", ")
				parts = append(parts, T(ctx, "values removed: %s", values))
			}
			if len(parts) == 0 {
				return T(ctx, "values reordered")
			}
			return semicolonList(ctx, parts)
		}
	case contracts.ChangeConstraintChanged:
		// Detail is "<option> <old> → <new>"; the option name is the
		// contract's own vocabulary, the values are data.
		name, rest, ok1 := strings.Cut(ch.Detail, " ")
		was, is, ok2 := strings.Cut(rest, " → ")
		if ok1 && ok2 {
			option, was, is := optionLabel(ctx, name), noneWord(ctx, localNumber(ctx, was)), noneWord(ctx, localNumber(ctx, is))
			return T(ctx, "%s: %s → %s", option, was, is)
		}
	}
	return ch.Detail
}

// splitChangePath turns "/inputs/company/[]/name" into ("inputs",
// [company * name]) for Contract.Lookup.
func splitChangePath(p string) (section string, path []string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(parts) < 2 || (parts[0] != "inputs" && parts[0] != "outputs") {
		return "", nil, false
	}
	path = parts[1:]
	for i, s := range path {
		if s == "[]" {
			path[i] = "*"
		}
	}
	return parts[0], path, true
}

// fieldSummary describes an added or removed field; a protected one says
// so (c is its effective classification), which a reviewer of the change
// must see.
func fieldSummary(ctx context.Context, f contracts.Field, c contracts.Classification) string {
	typ := typeLabel(ctx, f.Type)
	if c == contracts.ClassSensitive || c == contracts.ClassSecret {
		class := classLabel(ctx, c)
		if f.Required {
			return T(ctx, "required %s field of type %s", class, typ)
		}
		return T(ctx, "optional %s field of type %s", class, typ)
	}
	if f.Required {
		return T(ctx, "required field of type %s", typ)
	}
	return T(ctx, "optional field of type %s", typ)
}

func orNone(ctx context.Context, s string) string {
	if s == "" {
		return T(ctx, "none")
	}
	return s
}

// noneWord translates the diff's "none" (an option that is not set), in
// words that agree with any option's name.
func noneWord(ctx context.Context, s string) string {
	if s == "none" {
		return T(ctx, "not set")
	}
	return s
}

// minus returns the values of a not in b, in a's order.
func minus(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}

// pinnedByFact says which process versions pin a revision: "onboard_company
// versions 1–8, audit version 2".
func pinnedByFact(ctx context.Context, byProcess map[string][]int) fact {
	if len(byProcess) == 0 {
		return fact{Label: T(ctx, "Pinned by"), Value: T(ctx, "no process version"), TestID: "pinned-by"}
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(byProcess)) {
		vs := byProcess[p]
		numbers := engine.RevisionRanges(vs)
		if len(vs) == 1 {
			parts = append(parts, T(ctx, "%s version %s", p, numbers))
		} else {
			parts = append(parts, T(ctx, "%s versions %s", p, numbers))
		}
	}
	return fact{Label: T(ctx, "Pinned by"), Value: strings.Join(parts, ", "), TestID: "pinned-by"}
}
