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
	"github.com/relais/relais/internal/fault"
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
	Created        timeView
	Settled        timeView
}

// instanceView is the process instance page.
type instanceView struct {
	Chrome chrome

	Notice       string
	SummaryLabel string
	Summary      []fact

	PathLabel, PathIntro                                           string
	HeadStep, HeadNode, HeadOccurrence, HeadDefinition, HeadStatus string
	HeadRoute, HeadNext, HeadCreated, HeadSettled                  string
	Path                                                           []pathStep
	NoPath, EndLabel, End                                          string

	HeadField, HeadValue string
	Inputs               valueTable

	StopLabel, StopHref, StopIntro string
}

// instanceDetail shows an instance: its status, pinned process version, the
// path through its nodes with each node's occurrence and route, and its
// (masked) inputs.
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
	v := instanceView{
		Chrome:       c.chrome(r, T(ctx, "Process instance %s", id), "occurrences"),
		SummaryLabel: T(ctx, "Summary"),
		Summary:      instanceFacts(ctx, inst, occs),
		PathLabel:    T(ctx, "Path"),
		PathIntro:    T(ctx, "The nodes this instance reached, in order, each with its occurrence."),
		HeadStep:     "#", HeadNode: T(ctx, "Node"), HeadOccurrence: T(ctx, "Occurrence"), HeadDefinition: T(ctx, "Definition"),
		HeadStatus: T(ctx, "Status"), HeadRoute: T(ctx, "Route"), HeadNext: T(ctx, "Next node"),
		HeadCreated: T(ctx, "Created"), HeadSettled: T(ctx, "Settled"),
		NoPath:    T(ctx, "This instance has not reached a task yet."),
		HeadField: T(ctx, "Field"), HeadValue: T(ctx, "Value"),
		Inputs: valueTable{Title: T(ctx, "Process inputs"), TestID: "instance-inputs",
			Caption: T(ctx, "Inputs the instance was started with, labelled by process version %d's contract", inst.Version),
			Empty:   T(ctx, "This process takes no inputs."), Rows: valueRows(ctx, pv.Process.Inputs, inst.Inputs)},
	}
	if r.URL.Query().Get("stopped") == "1" {
		v.Notice = T(ctx, "The instance was stopped; its open occurrences are cancelled.")
	}
	for i, o := range occs {
		v.Path = append(v.Path, pathStepOf(ctx, i+1, o, pv.Process))
	}
	// Only operators and admins reach this page (requireOperator): all may stop.
	if stoppable(inst.Status) {
		v.StopLabel = T(ctx, "Stop this instance…")
		v.StopHref = instanceHref(inst.ID) + "/stop"
		v.StopIntro = T(ctx, "Stopping cancels the instance and its open occurrences. It does not complete anything.")
	}
	c.render(w, r, http.StatusOK, instancePage(v))
}

// stoppable reports whether an instance in status s may be stopped: a
// running one, and a held one (an incident an operator gives up on).
func stoppable(s string) bool {
	return s == engine.InstanceRunning || s == engine.InstanceHeld
}

func instanceFacts(ctx context.Context, inst engine.Instance, occs []engine.Occurrence) []fact {
	fs := []fact{
		{Label: T(ctx, "Status"), Value: statusLabel(ctx, inst.Status), Badge: inst.Status, TestID: "instance-status"},
		{Label: T(ctx, "Process"), Value: processAtVersion(ctx, inst.ProcessKey, inst.Version), TestID: "process-version"},
		{Label: T(ctx, "Started"), Time: formatTime(ctx, inst.CreatedAt)},
		{Label: T(ctx, "Ended"), Time: formatTimePtr(ctx, inst.EndedAt)},
	}
	if inst.EndNode != nil {
		fs = append(fs, fact{Label: T(ctx, "End node"), Value: *inst.EndNode, Code: true, TestID: "end-node"})
	}
	if inst.Status == engine.InstanceHeld && len(occs) > 0 {
		// A held instance stopped at its last node, whose occurrence
		// failed: nothing came after it.
		fs = append(fs, fact{Label: T(ctx, "Held at node"), Value: occs[len(occs)-1].Node, Code: true, TestID: "held-node"})
	}
	if inst.BusinessKey != nil {
		fs = append(fs, fact{Label: T(ctx, "Business key"), Value: *inst.BusinessKey, Code: true})
	}
	if inst.ErrorCode != nil {
		fs = append(fs, fact{Label: T(ctx, "Error code"), Value: *inst.ErrorCode, Code: true})
	}
	return fs
}

// pathStepOf describes one occurrence of the path and where the process
// went from it, read from the pinned process version.
func pathStepOf(ctx context.Context, n int, o engine.Occurrence, p *process.Process) pathStep {
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
				s.Next = process.Hold
			}
		}
	}
	return s
}

// stopView is the confirmation step before stopping an instance.
type stopView struct {
	Chrome      chrome
	Question    string
	Consequence string
	Error       string
	Action      string
	CSRF        string
	ReasonLabel string
	Reason      string
	Confirm     string
	Cancel      string
	BackHref    string
}

// stopView asks to stop instance id; held says it is held rather than
// running, which only changes the way back.
func (c *Console) stopView(r *http.Request, id uuid.UUID, held bool) stopView {
	ctx := r.Context()
	keep := T(ctx, "Keep it running")
	if held {
		keep = T(ctx, "Keep it held")
	}
	return stopView{
		Chrome:      c.chrome(r, T(ctx, "Stop process instance %s", id), "occurrences"),
		Question:    T(ctx, "Stop this instance? Its open occurrences are cancelled."),
		Consequence: T(ctx, "Services that hold one of them learn it when they next report, and their results are refused. Nothing is completed on their behalf, and a stopped instance cannot be resumed."),
		Action:      instanceHref(id) + "/stop",
		CSRF:        currentOf(ctx).csrf,
		ReasonLabel: T(ctx, "Reason (recorded in the audit log)"),
		Confirm:     T(ctx, "Stop the instance"),
		Cancel:      keep,
		BackHref:    instanceHref(id),
	}
}

// instanceStopConfirm asks before stopping.
func (c *Console) instanceStopConfirm(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		c.notFound(w, r)
		return
	}
	inst, err := c.eng.GetInstance(r.Context(), id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if !stoppable(inst.Status) {
		http.Redirect(w, r, instanceHref(id), http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, stopPage(c.stopView(r, id, inst.Status == engine.InstanceHeld)))
}

// instanceStop stops the instance (the CSRF token was checked by
// requireSession) and redirects to it.
func (c *Console) instanceStop(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		c.notFound(w, r)
		return
	}
	p, _ := auth.FromContext(ctx)
	reason := r.PostFormValue("reason")
	if _, err := c.eng.Act(ctx, engine.Actor{TokenID: p.TokenID, Name: p.Name}, engine.ActionStop, id, reason); err != nil {
		v := c.stopView(r, id, false)
		v.Reason = reason
		switch {
		case fault.HasCode(err, "instance_ended"):
			v.Error = T(ctx, "This instance has already ended; there is nothing to stop.")
			c.render(w, r, http.StatusConflict, stopPage(v))
			return
		case fault.HasCode(err, "invalid_request"):
			v.Error = T(ctx, "Say why you stop it: the reason is recorded in the audit log (at most 1,000 characters).")
			c.render(w, r, http.StatusBadRequest, stopPage(v))
			return
		}
		c.fail(w, r, err)
		return
	}
	c.logger.Info("console: instance stopped", "instance", id, "by", p.Name)
	http.Redirect(w, r, instanceHref(id)+"?stopped=1", http.StatusSeeOther)
}
