package console

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/auth"
)

// pathStep is one node the instance went through, with its occurrence.
type pathStep struct {
	Number         string
	Node           string
	OccurrenceID   string
	OccurrenceHref string
	Definition     string
	DefinitionHref string
	Status         string
	StatusLabel    string
	Route          string
	Next           string
	// NextText, when set, says in words where the process went instead
	// of a node name (an instance held for an operator).
	NextText string
	Created  timeView
	Settled  timeView
}

// instanceView is the process instance page.
type instanceView struct {
	Chrome chrome

	SummaryLabel string
	Summary      []fact
	// Attribution says who ended or changed the instance, from the audit
	// log: "Stopped by ops-alice at 15:20 UTC — “customer asked”".
	Attribution []string

	ActionsLabel, ActionsIntro string
	Actions                    []bulkLink

	PathLabel, PathIntro, PathCaption                              string
	HeadStep, HeadNode, HeadOccurrence, HeadDefinition, HeadStatus string
	HeadRoute, HeadNext, HeadCreated, HeadSettled                  string
	Path                                                           []pathStep
	NoPath                                                         string

	HistoryLabel, HistoryCaption, NoHistory string
	History                                 auditTable

	HeadField, HeadValue string
	Inputs               valueTable
}

// instanceDetail shows an instance: its status and who changed it, the
// actions an operator may take on it, its pinned process version, the path
// through its nodes with each node's occurrence and route, the operator
// actions recorded on it, and its (masked) inputs.
func (c *Console) instanceDetail(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		c.notFound(w, r)
		return
	}
	inst, err := c.eng.GetInstance(ctx, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	pv, err := c.eng.GetProcessVersion(ctx, inst.ProcessKey, inst.Version)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	occs, err := c.eng.InstanceOccurrences(ctx, id)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for i, o := range occs {
		if o.ErrorCode != nil && (*o.ErrorCode == "attempts_exhausted" || o.Mode == engine.ModePull && relaisCode(*o.ErrorCode)) {
			// Its attempts say what ended it, a worker whose answers were
			// refused among them (Camunda QA: the occurrence page said the
			// worker answered, the instance page it opens from did not),
			// and who wrote a code both Relais and workers use.
			full, err := c.eng.GetOccurrence(ctx, o.ID)
			if err != nil {
				c.serverError(w, r, err)
				return
			}
			occs[i] = full
		}
	}
	acts, err := c.eng.ListOperatorActions(ctx, engine.AuditFilter{Instance: &id, Limit: maxHistory})
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	retention, noted := c.eng.Retention()
	v := instanceView{
		Chrome:       c.liveChrome(r, T(ctx, "Process instance %s", id), "instances"),
		SummaryLabel: T(ctx, "Summary"),
		Summary:      append(instanceFacts(ctx, inst, occs, pv.Process), retentionFacts(ctx, inst, retention, noted)...),
		Attribution:  attribution(ctx, inst, acts),
		ActionsLabel: T(ctx, "Operator actions"),
		PathLabel:    T(ctx, "Path"),
		PathIntro:    T(ctx, "The nodes this instance reached, in order, each with its occurrence."),
		PathCaption:  T(ctx, "Nodes reached, in order"),
		HeadStep:     "#", HeadNode: T(ctx, "Node"), HeadOccurrence: T(ctx, "Occurrence"), HeadDefinition: T(ctx, "Definition"),
		HeadStatus: T(ctx, "Status"), HeadRoute: T(ctx, "Route"), HeadNext: T(ctx, "Next node"),
		HeadCreated: T(ctx, "Created"), HeadSettled: T(ctx, "Settled"),
		NoPath:       T(ctx, "This instance has not reached a task yet."),
		HistoryLabel: T(ctx, "Recorded operator actions"),
		NoHistory:    T(ctx, "No operator has acted on this instance."),
		History:      c.auditTable(ctx, acts, T(ctx, "Operator actions on this instance, newest first"), false),
		HeadField:    T(ctx, "Field"), HeadValue: T(ctx, "Value"),
		Inputs: valueTable{Title: T(ctx, "Process inputs"), TestID: "instance-inputs",
			Caption: T(ctx, "Inputs the instance was started with, labelled by process version %d's contract", inst.Version),
			Empty:   T(ctx, "This process takes no inputs."), Rows: valueRows(ctx, pv.Process.Inputs, inst.Inputs)},
	}
	for i, o := range occs {
		v.Path = append(v.Path, pathStepOf(ctx, i+1, o, inst, pv.Process))
	}
	held, _ := heldOccurrence(occs)
	waiting, retryNow := waitingRetry(occs, c.eng.Now())
	retryNow = retryNow && inst.Status == engine.InstanceRunning
	// The operator decides here, on what this page shows: its action links
	// carry the newest operator action it lists, and one recorded since
	// refuses the action (acted_meanwhile) rather than act on an incident
	// the operator did not see.
	seen := int64(0)
	if len(acts) > 0 {
		seen = acts[0].ID
	}
	// Only operators and admins reach this page (requireOperator): all may act.
	for _, a := range []engine.Action{engine.ActionRetry, engine.ActionAbandon, engine.ActionStop} {
		switch {
		case a == engine.ActionRetry && retryNow:
		case !actionAppliesTo(a, inst.Status) || a == engine.ActionRetry && !engine.Retryable(held):
			continue
		}
		v.Actions = append(v.Actions, bulkLink{Action: string(a), Label: actionLabel(ctx, a),
			Href: instanceHref(id) + "/" + string(a) + "?seen=" + strconv.FormatInt(seen, 10)})
	}
	if p, _ := auth.FromContext(ctx); p.Role == auth.RoleAdmin && instanceEnded(inst.Status) {
		v.Actions = append(v.Actions, bulkLink{Action: string(engine.ActionErase), Label: T(ctx, "Erase this instance…"), Href: eraseHref(id)})
		v.ActionsIntro = T(ctx, "This instance has ended. As an administrator you may erase it now rather than wait for retention (a data subject’s request): it is deleted with its occurrences and attempts.")
	}
	switch {
	case inst.Status == engine.InstanceHeld && !engine.Retryable(held):
		v.ActionsIntro = T(ctx, "This instance is held at a failed node: an incident. It cannot be retried: its occurrence at node %s failed before any attempt (its inputs could not be built), so it would fail the same way. Abandon fails the instance; stop cancels it. Each asks for a reason, recorded in the audit log.", held.Node)
	case inst.Status == engine.InstanceHeld:
		v.ActionsIntro = T(ctx, "This instance is held at a failed node: an incident. Retry offers the failed occurrence again; abandon fails the instance; stop cancels it. Each asks for a reason, recorded in the audit log.")
	case retryNow:
		// What failed, and when the retry comes, as the occurrence's page
		// says it (on-call QA: only the time, and no error).
		due := formatTime(ctx, waiting.AvailableAt)
		code := ""
		if waiting.ErrorCode != nil {
			code = *waiting.ErrorCode
		}
		v.ActionsIntro = T(ctx, "Its occurrence at node %s failed (%s) and waits for its retry, due %s (%s): retry offers it now, its attempts left unchanged. Stopping cancels the instance and its open occurrences. Neither completes anything; each asks for a reason, recorded in the audit log.",
			waiting.Node, code, clockTime(ctx, waiting.AvailableAt), due.Rel)
	case inst.Status == engine.InstanceRunning:
		v.ActionsIntro = T(ctx, "Stopping cancels the instance and its open occurrences. It does not complete anything.")
	}
	c.render(w, r, http.StatusOK, instancePage(v))
}

// maxHistory bounds the operator actions an instance page lists.
const maxHistory = 50

// attribution says who stopped, abandoned or retried the instance, newest
// first, from the audit log. A retry is shown only while the instance runs
// on from it: held again (it failed after the retry) or ended, the banner
// would credit the retry with a status it did not cause; the history
// below keeps every record.
func attribution(ctx context.Context, inst engine.Instance, acts []engine.OperatorAction) []string {
	var out []string
	retryShown := false
	for _, a := range acts {
		who, when, why := a.ActorName, formatTime(ctx, a.At).Text, visibleBidi(a.Reason)
		switch engine.Action(a.Action) {
		case engine.ActionStop:
			out = append(out, T(ctx, "Stopped by %s at %s — “%s”", who, when, why))
		case engine.ActionAbandon:
			out = append(out, T(ctx, "Abandoned by %s at %s — “%s”", who, when, why))
		case engine.ActionRetry:
			if inst.Status != engine.InstanceRunning || retryShown {
				continue
			}
			retryShown = true
			out = append(out, T(ctx, "Retried by %s at %s — “%s”", who, when, why))
		}
	}
	return out
}

func instanceFacts(ctx context.Context, inst engine.Instance, occs []engine.Occurrence, p *process.Process) []fact {
	fs := []fact{
		{Label: T(ctx, "Status"), Value: statusLabel(ctx, inst.Status), Badge: inst.Status, TestID: "instance-status"},
		{Label: T(ctx, "Process"), Value: processAtVersion(ctx, inst.ProcessKey, inst.Version), TestID: "process-version",
			Href: processVersionHref(inst.ProcessKey, inst.Version)},
		{Label: T(ctx, "Started"), Time: formatTime(ctx, inst.CreatedAt)},
	}
	if inst.EndedAt != nil {
		fs = append(fs, fact{Label: T(ctx, "Ended"), Time: formatTime(ctx, *inst.EndedAt)})
	}
	if inst.EndNode != nil {
		fs = append(fs, fact{Label: endNodeLabel(ctx, inst, p), Value: *inst.EndNode, Code: true, TestID: "end-node"})
	}
	if o, ok := heldOccurrence(occs); ok && inst.Status == engine.InstanceHeld {
		fs = append(fs, fact{Label: T(ctx, "Held at node"), Value: o.Node, Code: true, TestID: "held-node"},
			fact{Label: T(ctx, "Failed occurrence"), Value: o.ID.String(), Href: occurrenceHref(o.ID), Code: true, TestID: "held-occurrence"})
	}
	if inst.BusinessKey != nil {
		fs = append(fs, fact{Label: T(ctx, "Business key"), Value: *inst.BusinessKey, Code: true, TestID: "business-key"})
	}
	if inst.ErrorCode != nil {
		// The occurrence that failed with the instance's code says what it
		// meant there (a push call's timeout, say).
		var failed *engine.Occurrence
		for i := range occs {
			if occs[i].ErrorCode != nil && *occs[i].ErrorCode == *inst.ErrorCode {
				failed = &occs[i]
			}
		}
		label := T(ctx, "Error code")
		if inst.Status == engine.InstanceCancelled {
			// Stopped while held: the code is why it was held, as an
			// abandoned instance's is said below.
			label = T(ctx, "Held for")
		}
		fs = append(fs, fact{Label: label, Value: *inst.ErrorCode, Code: true, TestID: "instance-error-code",
			Note: occurrenceErrorMeaning(ctx, *inst.ErrorCode, failed, inst.Status == engine.InstanceHeld, false)})
		if failed != nil {
			// What the service said, read here rather than one page away.
			if f, ok := errorMessageFact(ctx, *inst.ErrorCode, failed); ok {
				f.TestID = "instance-error-message"
				fs = append(fs, f)
			}
		}
		if *inst.ErrorCode == engine.AbandonedCode && inst.EndNode != nil {
			// "abandoned" is the operator's decision; why the instance
			// was held is its occurrence's error, said here too.
			for i := range occs {
				if o := occs[i]; o.Node == *inst.EndNode && o.Status == engine.StatusFailed && o.ErrorCode != nil {
					fs = append(fs, fact{Label: T(ctx, "Held for"), Value: *o.ErrorCode, Code: true, TestID: "held-for-code",
						Note: occurrenceErrorMeaning(ctx, *o.ErrorCode, &o, false, false)})
					if f, ok := errorMessageFact(ctx, *o.ErrorCode, &o); ok {
						f.TestID = "held-for-message"
						fs = append(fs, f)
					}
				}
			}
		}
	}
	return fs
}

// retentionFacts says when retention deletes an ended instance (operator
// QA: the console did not say what the retention was, so a search that
// found nothing could not tell a typo from a deletion): the applied
// setting, which is another replica's when theirs is longer. Nothing for
// a running instance, or before the replica noted its setting.
func retentionFacts(ctx context.Context, inst engine.Instance, r engine.Retention, ok bool) []fact {
	if inst.EndedAt == nil || !ok {
		return nil
	}
	if r.Applied <= 0 {
		never := T(ctx, "never: retention keeps ended instances forever (RELAIS_RETENTION)")
		if r.Configured > 0 {
			never = T(ctx, "never: another replica’s RELAIS_RETENTION keeps ended instances forever")
		}
		return []fact{{Label: T(ctx, "Deleted by retention"), Value: never, TestID: "retention"}}
	}
	f := fact{Label: T(ctx, "Deleted by retention"), Time: formatTime(ctx, inst.EndedAt.Add(r.Applied)), TestID: "retention",
		Note: T(ctx, "ended instances are kept %s (RELAIS_RETENTION)", formatDuration(ctx, r.Applied))}
	if r.Applied != r.Configured {
		f.Note = T(ctx, "ended instances are kept %s, another replica’s longer RELAIS_RETENTION", formatDuration(ctx, r.Applied))
	}
	return []fact{f}
}

// endNodeLabel names the node an ended instance stopped at: an end node,
// or the task node it was abandoned or failed at (with no error path).
func endNodeLabel(ctx context.Context, inst engine.Instance, p *process.Process) string {
	if n := p.Nodes[*inst.EndNode]; n != nil && n.Kind == process.KindEnd {
		return T(ctx, "End node")
	}
	if inst.ErrorCode != nil && *inst.ErrorCode == engine.AbandonedCode {
		return T(ctx, "Abandoned at node")
	}
	return T(ctx, "Failed at node")
}

// heldStepText says where a failure that held inst led: still held, or
// ended since by an operator. A retried occurrence is offered again, so a
// failed one whose instance is no longer held was abandoned or stopped.
func heldStepText(ctx context.Context, inst engine.Instance) string {
	switch {
	case inst.Status == engine.InstanceCancelled:
		return T(ctx, "held, then stopped by an operator")
	case inst.Status == engine.InstanceFailed && inst.ErrorCode != nil && *inst.ErrorCode == engine.AbandonedCode:
		return T(ctx, "held, then abandoned by an operator")
	}
	return T(ctx, "held for an operator")
}

// pathStepOf describes one occurrence of the path and where the process
// went from it, read from the pinned process version and, for a failure
// that held the instance, from what became of it since.
func pathStepOf(ctx context.Context, n int, o engine.Occurrence, inst engine.Instance, p *process.Process) pathStep {
	s := pathStep{Number: strconv.Itoa(n), Node: o.Node, OccurrenceID: o.ID.String(), OccurrenceHref: occurrenceHref(o.ID),
		Definition: definitionAtRevision(ctx, o.Definition, o.Revision), DefinitionHref: revisionHref(o.Definition, o.Revision),
		Status: o.Status, StatusLabel: statusLabel(ctx, o.Status), Created: formatTime(ctx, o.CreatedAt), Settled: formatTimePtr(ctx, o.SettledAt)}
	if o.Route != nil {
		s.Route = *o.Route
	}
	node := p.Nodes[o.Node]
	if node == nil {
		return s
	}
	switch o.Status {
	case engine.StatusCompleted:
		if o.Route != nil && node.Routes != nil {
			s.Next = node.Routes[*o.Route]
		} else {
			s.Next = node.Next
		}
	case engine.StatusFailed:
		code := ""
		if o.ErrorCode != nil {
			code = *o.ErrorCode
		}
		if t, ok := p.NextOnFailure(o.Node, code); ok {
			s.Next = t.Node
			if t.Hold {
				s.Next, s.NextText = "", heldStepText(ctx, inst)
			}
		}
	}
	return s
}
