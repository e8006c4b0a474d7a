package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpauth"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/suggest"
)

type startRequest struct {
	// Version is a pointer so that 0 is told apart from absent (null or
	// left out: the latest version): a client's unset variable would
	// otherwise run whatever version is latest (designer QA).
	Version     *int            `json:"version"`
	Inputs      json.RawMessage `json:"inputs"`
	BusinessKey *string         `json:"business_key"`
}

type pathStep struct {
	Node         string     `json:"node"`
	OccurrenceID uuid.UUID  `json:"occurrence_id"`
	Definition   string     `json:"definition"`
	Revision     int        `json:"revision"`
	Mode         string     `json:"mode"`
	Status       string     `json:"status"`
	Route        *string    `json:"route"`
	ErrorCode    *string    `json:"error_code"`
	ErrorMessage *string    `json:"error_message,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	SettledAt    *time.Time `json:"settled_at"`
}

type instanceJSON struct {
	ID          uuid.UUID       `json:"id"`
	Process     string          `json:"process"`
	Version     int             `json:"version"`
	Status      string          `json:"status"`
	BusinessKey *string         `json:"business_key"`
	EndNode     *string         `json:"end_node"`
	ErrorCode   *string         `json:"error_code"`
	CreatedAt   time.Time       `json:"created_at"`
	EndedAt     *time.Time      `json:"ended_at"`
	Inputs      json.RawMessage `json:"inputs,omitempty"`
}

// instanceDetailJSON is an instance with its path: empty, never absent, for
// an instance that entered no task node.
type instanceDetailJSON struct {
	instanceJSON
	// HeldAt is, on a held instance's detail, the failed occurrence it
	// waits at, found without scanning the path.
	HeldAt *heldAtJSON `json:"held_at,omitempty"`
	Path   []pathStep  `json:"path"`
}

type heldAtJSON struct {
	Node         string    `json:"node"`
	Definition   string    `json:"definition"`
	OccurrenceID uuid.UUID `json:"occurrence_id"`
}

func toInstanceJSON(i engine.Instance, withInputs bool) instanceJSON {
	out := instanceJSON{ID: i.ID, Process: i.ProcessKey, Version: i.Version, Status: i.Status, BusinessKey: i.BusinessKey,
		EndNode: i.EndNode, ErrorCode: i.ErrorCode, CreatedAt: i.CreatedAt, EndedAt: i.EndedAt}
	if withInputs {
		out.Inputs = i.Inputs
	}
	return out
}

// idempotencyKeyProblem says what is wrong with an idempotency key that
// was given (the Idempotency-Key header, a batch item's member), or "".
func idempotencyKeyProblem(key string) string {
	switch {
	case strings.TrimSpace(key) == "":
		// An unset variable, most likely: read as no key, every retry
		// would start another instance.
		return "is empty: give a key, or leave it out"
	case !utf8.ValidString(key):
		return "holds bytes that are not UTF-8 text"
	case strings.TrimSpace(key) != key:
		// A header's value comes trimmed: a batch item's key so padded
		// could never be replayed by a single start.
		return "must not begin or end with white space"
	case strings.ContainsFunc(key, engine.Invisible):
		return "must not hold control or format characters (a zero-width space, a byte order mark): nobody could type it again"
	case len(key) > engine.MaxIdempotencyKey:
		return fmt.Sprintf("is longer than %d bytes", engine.MaxIdempotencyKey)
	}
	return ""
}

func (a *API) startInstance() http.Handler {
	return a.handleIdempotent(func(w http.ResponseWriter, r *http.Request) error {
		req, err := httpjson.Decode[startRequest](w, r, a.maxBody)
		if err != nil {
			return httpjson.UnknownHint(err, startHints)
		}
		var idem string
		switch vs := r.Header.Values("Idempotency-Key"); len(vs) {
		case 0:
		case 1:
			idem = vs[0]
			if why := idempotencyKeyProblem(idem); why != "" {
				return fault.New(fault.BadRequest, "invalid_request", "Idempotency-Key %s", why).
					WithErrors([]fault.FieldError{{Path: "Idempotency-Key", Message: why}})
			}
		default:
			// Which one would the client expect to be honoured?
			return fault.New(fault.BadRequest, "invalid_request", "Idempotency-Key is given %d times: give one", len(vs)).
				WithErrors([]fault.FieldError{{Path: "Idempotency-Key", Message: "given more than once"}})
		}
		version, bad := startVersion(req.Version)
		if bad != "" {
			return fault.New(fault.BadRequest, "invalid_request", "version %s", bad).
				WithErrors([]fault.FieldError{{Path: "/version", Message: bad}})
		}
		inst, created, err := a.eng.StartInstance(r.Context(), engine.StartRequest{ProcessKey: chi.URLParam(r, "key"), Version: version,
			Inputs: req.Inputs, BusinessKey: req.BusinessKey, IdempotencyKey: idem})
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
			located(w, "/api/v1/instances/"+inst.ID.String())
		}
		return a.writeInstance(w, r, inst, status)
	})
}

// Where a start's members go, by the depth of an unknown one (its
// pointer's segments), for a first request that left out "inputs" (or, in
// a batch, "items"): added to the unknown_field refusal by httpjson.UnknownHint.
var (
	startHints = map[int]string{1: `a start takes "inputs", "business_key" and "version"; the process's inputs go under "inputs" ({"inputs": {…}})`}
	batchHints = map[int]string{
		1: `a batch takes {"items": [{"inputs": {…}, "business_key": …, "idempotency_key": …}, …]}`,
		3: `an item takes "inputs", "business_key", "version" and "idempotency_key"; the process's inputs go under each item's "inputs"`,
	}
)

func (a *API) writeInstance(w http.ResponseWriter, r *http.Request, inst engine.Instance, status int) error {
	steps := inst.Path
	if steps == nil {
		occs, err := a.eng.InstanceOccurrences(r.Context(), inst.ID)
		if err != nil {
			return err
		}
		steps = make([]engine.Step, len(occs))
		for i, o := range occs {
			steps[i] = o.Step()
		}
	}
	out := instanceDetailJSON{instanceJSON: toInstanceJSON(inst, true), Path: make([]pathStep, len(steps))}
	for i, s := range steps {
		out.Path[i] = pathStep{Node: s.Node, OccurrenceID: s.Occurrence, Definition: s.Definition, Revision: s.Revision, Mode: s.Mode,
			Status: s.Status, Route: s.Route, ErrorCode: s.ErrorCode, ErrorMessage: s.Problem, CreatedAt: s.CreatedAt, SettledAt: s.SettledAt}
	}
	if i, ok := engine.HeldStep(steps); ok && inst.Status == engine.InstanceHeld {
		s := steps[i]
		out.HeldAt = &heldAtJSON{Node: s.Node, Definition: s.Definition, OccurrenceID: s.Occurrence}
	}
	httpjson.Encode(w, status, out)
	return nil
}

func idParam(r *http.Request, what string) (uuid.UUID, error) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		return uuid.UUID{}, fault.NotAnID(what, chi.URLParam(r, "id"))
	}
	return id, nil
}

// getInstance reads an instance; with ?wait=, one still running is read
// once it no longer runs (completed, failed, cancelled, or held for an
// operator), or when the wait ends, whichever comes first: a caller that
// wants the outcome of what it started waits here instead of polling.
func (a *API) getInstance(lookup auth.Lookup) http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r, "instance")
		if err != nil {
			return err
		}
		wait, err := httpjson.Wait(r, a.maxWait)
		if err != nil {
			return err
		}
		inst, err := a.eng.GetInstance(r.Context(), id)
		if err != nil {
			return err
		}
		if wait > 0 && inst.Status == engine.InstanceRunning {
			// A token revoked or expired while its read waits is refused
			// then, as a waiting fetch's is: revocation is at once.
			token, _ := httpauth.Bearer(r.Header)
			still := func(ctx context.Context) error {
				_, err := auth.Authenticate(ctx, lookup, token)
				return err
			}
			if p, ok := auth.FromContext(r.Context()); ok && p.ExpiresAt != nil {
				// Answered 401 at the token's expiry, not at the wait's
				// end (verifier QA: 15 s past it).
				wait = min(wait, max(time.Until(*p.ExpiresAt), 0))
			}
			if err := a.ends.Wait(r.Context(), id, wait, still); err != nil {
				return err
			}
			if r.Context().Err() != nil {
				return r.Context().Err()
			}
			// Expired meanwhile, with no change to wake the wait.
			if err := still(r.Context()); err != nil {
				return err
			}
			if inst, err = a.eng.GetInstance(r.Context(), id); err != nil {
				return err
			}
		}
		return a.writeInstance(w, r, inst, http.StatusOK)
	})
}

type actionRequest struct {
	Reason string `json:"reason"`
	// LastActionID is the id of the newest audit record the client saw on
	// the instance (0: none): another recorded since refuses the action.
	LastActionID *int64 `json:"last_action_id"`
}

// actOnInstance applies an operator action (stop, retry, abandon) to one
// instance; the reason is required and recorded in the audit log.
func (a *API) actOnInstance(action engine.Action) http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r, "instance")
		if err != nil {
			return err
		}
		// Sent without a body, the action is refused for its missing reason.
		req, err := httpjson.DecodeOrZero[actionRequest](w, r, a.maxBody)
		if err != nil {
			return err
		}
		inst, applied, err := a.eng.ActSeen(r.Context(), actorOf(r), action, id, req.Reason, req.LastActionID)
		if err != nil {
			return err
		}
		// A repeated stop answers as the first did; this says whether this
		// request changed anything (and recorded its reason).
		w.Header().Set("Relais-Applied", strconv.FormatBool(applied))
		return a.writeInstance(w, r, inst, http.StatusOK)
	})
}

// erasureJSON answers an erasure (POST /instances/{id}/erase).
type erasureJSON struct {
	InstanceID uuid.UUID `json:"instance_id"`
	// AuditID is the erasure's record in GET /audit/actions.
	AuditID  int64     `json:"audit_id"`
	ErasedAt time.Time `json:"erased_at"`
	ErasedBy string    `json:"erased_by"`
	// Occurrences and Attempts are what this request deleted: 0 when the
	// instance had been erased before (Relais-Applied: false).
	Occurrences int64 `json:"occurrences"`
	Attempts    int64 `json:"attempts"`
}

// eraseInstance deletes an ended instance's data at once (a data
// subject's request), recorded with its required reason.
func (a *API) eraseInstance() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r, "instance")
		if err != nil {
			return err
		}
		req, err := httpjson.DecodeOrZero[eraseRequest](w, r, a.maxBody)
		if err != nil {
			return err
		}
		e, err := a.eng.Erase(r.Context(), actorOf(r), id, req.Reason)
		if err != nil {
			return err
		}
		w.Header().Set("Relais-Applied", strconv.FormatBool(e.Applied))
		httpjson.Encode(w, http.StatusOK, erasureJSON{InstanceID: id, AuditID: e.Record.ID, ErasedAt: e.Record.At, ErasedBy: e.Record.ActorName,
			Occurrences: e.Occurrences, Attempts: e.Attempts})
		return nil
	})
}

// eraseRequest is an erasure's body: the reason alone (no last_action_id:
// an ended instance has no action left to race with).
type eraseRequest struct {
	Reason string `json:"reason"`
}

// actorOf is who makes a request, as the audit log records it.
func actorOf(r *http.Request) engine.Actor {
	p, _ := auth.FromContext(r.Context())
	return engine.Actor{TokenID: p.TokenID, Name: p.Name}
}

// instanceParams are the query parameters of instanceFilter.
var instanceParams = []string{"process", "version", "status", "business_key", "error_code", "held_at", "retrying_at", "created_after", "created_before"}

// instanceFilter reads the instance filters shared by the list, bulk
// actions and the console.
func instanceFilter(q url.Values) (engine.InstanceFilter, error) {
	var errs []fault.FieldError
	f := engine.InstanceFilter{ProcessKey: textParam(q, "process", &errs), Status: q.Get("status"),
		BusinessKey: textParam(q, "business_key", &errs), ErrorCode: textParam(q, "error_code", &errs), HeldAt: textParam(q, "held_at", &errs),
		RetryingAt: textParam(q, "retrying_at", &errs)}
	if f.RetryingAt != "" && f.Status != "" && f.Status != "running" {
		// Nothing would match, which would read as nothing waiting.
		errs = append(errs, fault.FieldError{Path: "retrying_at", Message: "keeps running instances (whose retry waits): give status running, or none"})
	}
	if f.Status == "running" || f.RetryingAt != "" {
		// As the bulk action refuses it.
		errs = append(errs, engine.RunningFilterErrors(f, "")...)
	}
	if f.Status != "" && !instanceStatuses[f.Status] {
		errs = append(errs, fault.FieldError{Path: "status", Message: "must be running, held, completed, failed or cancelled" +
			suggest.Hint(f.Status, slices.Sorted(maps.Keys(instanceStatuses)))})
	}
	if s := q.Get("version"); s != "" {
		n, err := strconv.Atoi(s)
		switch {
		case err != nil || n < 1:
			errs = append(errs, fault.FieldError{Path: "version", Message: "must be a version number"})
		case f.ProcessKey == "":
			errs = append(errs, fault.FieldError{Path: "version", Message: "is a process's version: give process too"})
		}
		f.Version = n
	}
	f.CreatedAfter = timeParam(q, "created_after", &errs)
	f.CreatedBefore = timeParam(q, "created_before", &errs)
	if len(errs) > 0 {
		return f, fault.New(fault.BadRequest, "invalid_request", "invalid filter").WithErrors(errs)
	}
	return f, nil
}

type bulkFilterJSON struct {
	// A field given empty, blank or null is refused, not read as no
	// filter: a script's unset variable would act on every instance.
	Process filterText `json:"process"`
	// Version narrows Process to one of its versions.
	Version     filterVersion `json:"version"`
	Status      filterText    `json:"status"`
	BusinessKey filterText    `json:"business_key"`
	ErrorCode   filterText    `json:"error_code"`
	HeldAt      filterText    `json:"held_at"`
	// RetryingAt keeps running instances whose occurrence of that
	// definition waits out a retry delay.
	RetryingAt filterText `json:"retrying_at"`
	// Text, not time.Time: the filter takes what the list's query takes
	// (a date too), and a decoding error would quote Go's layout.
	CreatedAfter  filterText `json:"created_after"`
	CreatedBefore filterText `json:"created_before"`
	// MatchedBefore keeps the instances that matched then: created before
	// it, and held before it when held (a count pinned to its moment).
	MatchedBefore filterText `json:"matched_before"`
}

// filterText is a bulk filter's text field: left out, it does not filter;
// given, it is text (null is refused).
type filterText struct{ v *string }

func (f *filterText) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return errors.New("must be text, not null: leave the field out not to filter by it")
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("must be a string")
	}
	f.v = &s
	return nil
}

// filterVersion is a bulk filter's process version: left out, every
// version; given, a version number (null is refused, as for text).
type filterVersion struct{ v *int }

func (f *filterVersion) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return errors.New("must be a version number, not null: leave the field out not to filter by it")
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil || n < 1 {
		return errors.New("must be a version number (1 or more)")
	}
	f.v = &n
	return nil
}

func (f filterVersion) number() int {
	if f.v == nil {
		return 0
	}
	return *f.v
}

// maxBreakdown bounds the groups a bulk action's count lists.
const maxBreakdown = 20

// bulkGroupJSON is one process and error code among the instances a bulk
// action's filter matches.
type bulkGroupJSON struct {
	Process   string  `json:"process"`
	ErrorCode *string `json:"error_code"`
	Count     int64   `json:"count"`
}

type bulkRequest struct {
	Action       string         `json:"action"`
	Reason       string         `json:"reason"`
	Filter       bulkFilterJSON `json:"filter"`
	ConfirmCount *int64         `json:"confirm_count"`
	// BulkID is the id the action's audit records carry, chosen by a
	// client that follows them (GET /audit/actions?bulk=) while it runs.
	BulkID *string `json:"bulk_id"`
}

// actOnFilter applies an action to every instance a filter matches: without
// confirm_count it only counts (what the operator confirms); with it, it
// applies when the count still holds (409 count_changed with the new count
// otherwise), in batches, and reports what was applied and skipped.
func (a *API) actOnFilter() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		req, err := httpjson.Decode[bulkRequest](w, r, a.maxBody)
		if err != nil {
			return err
		}
		action, ok := engine.ParseAction(req.Action)
		if !ok {
			return fault.New(fault.BadRequest, "invalid_request", "unknown action").
				WithErrors([]fault.FieldError{{Path: "/action", Message: "must be retry, abandon or stop"}})
		}
		var errs []fault.FieldError
		given := func(v *string, name string) string {
			switch {
			case v != nil && strings.TrimSpace(*v) == "":
				errs = append(errs, fault.FieldError{Path: "/filter/" + name, Message: "must not be empty: leave it out to match every instance"})
				return ""
			case v != nil && strings.TrimSpace(*v) != *v:
				// As the list's query refuses it: "no definition has the
				// key" read as a misspelling, not as a space pasted in.
				errs = append(errs, fault.FieldError{Path: "/filter/" + name, Message: "must not be padded with white space: no key or code is"})
				return ""
			}
			return deref(v)
		}
		f := engine.InstanceFilter{ProcessKey: given(req.Filter.Process.v, "process"), Status: given(req.Filter.Status.v, "status"),
			BusinessKey: given(req.Filter.BusinessKey.v, "business_key"), ErrorCode: given(req.Filter.ErrorCode.v, "error_code"),
			HeldAt:        given(req.Filter.HeldAt.v, "held_at"),
			RetryingAt:    given(req.Filter.RetryingAt.v, "retrying_at"),
			Version:       req.Filter.Version.number(),
			CreatedAfter:  timeFilter(given(req.Filter.CreatedAfter.v, "created_after"), "/filter/created_after", &errs),
			CreatedBefore: timeFilter(given(req.Filter.CreatedBefore.v, "created_before"), "/filter/created_before", &errs)}
		if at := timeFilter(given(req.Filter.MatchedBefore.v, "matched_before"), "/filter/matched_before", &errs); at != nil {
			f.PinMatched(*at)
		}
		if req.ConfirmCount != nil && *req.ConfirmCount < 0 {
			errs = append(errs, fault.FieldError{Path: "/confirm_count", Message: "must be the count confirmed: 0 or more"})
		}
		var bulkID uuid.UUID
		if req.BulkID != nil {
			if bulkID, err = uuid.Parse(*req.BulkID); err != nil || bulkID == uuid.Nil {
				errs = append(errs, fault.FieldError{Path: "/bulk_id", Message: "must be a UUID other than the nil one (or left out for a new one)"})
			}
		}
		// A key nothing has (a typo) would count 0 and read as "the
		// incident is over": name it instead.
		if f.ProcessKey == "" && f.Version > 0 {
			errs = append(errs, fault.FieldError{Path: "/filter/version", Message: "is a process's version: give process too"})
		}
		u, err := a.eng.UnknownFilterKeys(r.Context(), f)
		if err != nil {
			return err
		}
		errs = append(errs, unknownKeyErrors(u, "/filter/", filterKeys{Process: f.ProcessKey, Version: f.Version, HeldAt: f.HeldAt, RetryingAt: f.RetryingAt})...)
		if len(errs) > 0 {
			return fault.New(fault.BadRequest, "invalid_request", "invalid bulk action").WithErrors(errs)
		}
		if req.ConfirmCount == nil {
			b, err := a.eng.BreakdownForAction(r.Context(), action, f, maxBreakdown)
			if err != nil {
				return err
			}
			breakdown := make([]bulkGroupJSON, len(b.Groups))
			for i, g := range b.Groups {
				breakdown[i] = bulkGroupJSON{Process: g.ProcessKey, ErrorCode: g.ErrorCode, Count: g.Count}
			}
			answer := map[string]any{"action": action, "count": b.Count, "applied": false, "breakdown": breakdown,
				"breakdown_truncated": b.Truncated}
			if action == engine.ActionRetry && !action.BringsForward(f) {
				// A retry leaves out the held instances it cannot retry: a
				// script reading only count would take "0" for the
				// incident's end. An abandon applies to every held one.
				held, err := a.eng.CountForAction(r.Context(), engine.ActionAbandon, f)
				if err != nil {
					return err
				}
				answer["not_retryable_count"] = max(held-b.Count, 0)
			}
			if action == engine.ActionStop {
				// As the console's confirmation warns: a stop aborts these
				// calls, which their destinations may have acted on.
				answer["calling_count"] = b.Calling
			}
			if action == engine.ActionRetry {
				// Held at a push call that may have been carried out: a
				// retry calls again (the console's warning, for scripts).
				answer["may_have_acted_count"] = b.MayHaveActed
			}
			httpjson.Encode(w, http.StatusOK, answer)
			return nil
		}
		res, err := a.eng.ActOnFilter(r.Context(), actorOf(r), action, f, req.Reason, *req.ConfirmCount, bulkID)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, map[string]any{"action": action, "bulk_id": res.ID, "count": res.Matched,
			"applied": true, "applied_count": res.Applied, "skipped_count": res.Skipped})
		return nil
	})
}

type operatorActionJSON struct {
	ID           int64      `json:"id"`
	At           time.Time  `json:"at"`
	Actor        string     `json:"actor"`
	ActorTokenID *int64     `json:"actor_token_id"`
	ActorRole    *string    `json:"actor_role"`
	Action       string     `json:"action"`
	Reason       string     `json:"reason"`
	InstanceID   uuid.UUID  `json:"instance_id"`
	OccurrenceID *uuid.UUID `json:"occurrence_id"`
	BulkID       *uuid.UUID `json:"bulk_id"`
	// BroughtForward is true on a retry of a running instance: it offered
	// a waiting retry now, attempts unchanged (a held one's: a fresh budget).
	BroughtForward bool `json:"brought_forward"`
	// InstanceDeleted is true once retention deleted the instance, or it
	// was erased: the record stays, GET /instances/{id} answers 404.
	InstanceDeleted bool `json:"instance_deleted"`
}

func (a *API) listOperatorActions() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		before, limit, err := httpjson.PageParams[int64](r, "action", "instance", "bulk", "actor", "business_key", "acted_after", "acted_before")
		if err != nil {
			return err
		}
		q := r.URL.Query()
		f := engine.AuditFilter{Action: q.Get("action"), Actor: q.Get("actor"), BusinessKey: q.Get("business_key"), Before: before, Limit: limit + 1}
		var errs []fault.FieldError
		f.ActedAfter = timeParam(q, "acted_after", &errs)
		f.ActedBefore = timeParam(q, "acted_before", &errs)
		if f.ActedAfter != nil && f.ActedBefore != nil && !f.ActedAfter.Before(*f.ActedBefore) {
			// An empty window is a mistake, not a quiet night.
			errs = append(errs, fault.FieldError{Path: "acted_before", Message: "must be after acted_after"})
		}
		if len(errs) > 0 {
			return fault.New(fault.BadRequest, "invalid_request", "invalid filter").WithErrors(errs)
		}
		for _, p := range []struct {
			name, what string
			id         **uuid.UUID
		}{{"instance", "an instance id", &f.Instance}, {"bulk", "a bulk_id", &f.Bulk}} {
			if s := q.Get(p.name); s != "" {
				id, err := uuid.Parse(s)
				if err != nil {
					return fault.New(fault.BadRequest, "invalid_request", "invalid filter").WithErrors([]fault.FieldError{{Path: p.name, Message: "must be " + p.what}})
				}
				*p.id = &id
			}
		}
		if _, ok := engine.ParseAction(f.Action); f.Action != "" && !ok && f.Action != string(engine.ActionErase) {
			return fault.New(fault.BadRequest, "invalid_request", "invalid filter").WithErrors([]fault.FieldError{{Path: "action", Message: "must be retry, abandon, stop or erase"}})
		}
		acts, err := a.eng.ListOperatorActions(r.Context(), f)
		if err != nil {
			return err
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(acts, limit, func(x engine.OperatorAction) any { return x.ID },
			func(x engine.OperatorAction) operatorActionJSON {
				var role *string
				if x.ActorRole != "" {
					role = &x.ActorRole
				}
				return operatorActionJSON{ID: x.ID, At: x.At, Actor: x.ActorName, ActorTokenID: x.ActorTokenID, ActorRole: role,
					InstanceDeleted: x.InstanceDeleted, Action: x.Action, Reason: x.Reason,
					InstanceID: x.InstanceID, OccurrenceID: x.OccurrenceID, BulkID: x.BulkID, BroughtForward: x.BroughtForward}
			}))
		return nil
	})
}

// bulkActionJSON is a bulk action's record (GET /audit/bulk/{id}).
type bulkActionJSON struct {
	BulkID       uuid.UUID       `json:"bulk_id"`
	Action       string          `json:"action"`
	Reason       string          `json:"reason"`
	Actor        string          `json:"actor"`
	ActorTokenID *int64          `json:"actor_token_id"`
	ActorRole    *string         `json:"actor_role"`
	Filter       json.RawMessage `json:"filter"`
	Matched      int64           `json:"matched_count"`
	Applied      int64           `json:"applied_count"`
	Skipped      int64           `json:"skipped_count"`
	// Status is running until the action ended: completed, or stopped by
	// an error between two batches.
	Status       string     `json:"status"`
	StartedAt    time.Time  `json:"started_at"`
	ProgressedAt time.Time  `json:"progressed_at"`
	EndedAt      *time.Time `json:"ended_at"`
}

func (a *API) getBulkAction() http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		id, err := idParam(r, "bulk action")
		if err != nil {
			return err
		}
		b, err := a.eng.BulkAction(r.Context(), id)
		if err != nil {
			return err
		}
		out := bulkActionJSON{BulkID: b.ID, Action: b.Action, Reason: b.Reason, Actor: b.ActorName, ActorTokenID: b.ActorTokenID,
			Filter: b.Filter, Matched: b.Matched, Applied: b.Applied, Skipped: b.Skipped, Status: b.Status(),
			StartedAt: b.StartedAt, ProgressedAt: b.Progressed, EndedAt: b.EndedAt}
		if b.ActorRole != "" {
			out.ActorRole = &b.ActorRole
		}
		httpjson.Encode(w, http.StatusOK, out)
		return nil
	})
}

var instanceStatuses = map[string]bool{"running": true, "held": true, "completed": true, "failed": true, "cancelled": true}

func (a *API) listInstances() http.Handler {
	return a.handleQuery(func(w http.ResponseWriter, r *http.Request) error {
		before, limit, err := httpjson.PageParams[*uuid.UUID](r, instanceParams...)
		if err != nil {
			return err
		}
		q := r.URL.Query()
		f, err := instanceFilter(q)
		if err != nil {
			return err
		}
		f.Before, f.Limit = before, limit+1
		insts, err := a.eng.ListInstances(r.Context(), f)
		if err != nil {
			return err
		}
		if len(insts) == 0 && before == nil {
			// Empty: a key nothing has (a typo) must not read as "none".
			u, err := a.eng.UnknownFilterKeys(r.Context(), f)
			if err != nil {
				return err
			}
			if errs := unknownKeyErrors(u, "", filterKeys{Process: f.ProcessKey, Version: f.Version, HeldAt: f.HeldAt, RetryingAt: f.RetryingAt}); len(errs) > 0 {
				return fault.New(fault.BadRequest, "invalid_request", "invalid filter").WithErrors(errs)
			}
		}
		httpjson.Encode(w, http.StatusOK, httpjson.NewPage(insts, limit, func(i engine.Instance) any { return i.ID },
			func(i engine.Instance) instanceJSON { return toInstanceJSON(i, false) }))
		return nil
	})
}

// startVersion is the version a start asks for (0: the latest, when it
// names none), or why the one it names is no version number.
func startVersion(v *int) (int, string) {
	switch {
	case v == nil:
		return 0, ""
	case *v < 1:
		return 0, fmt.Sprintf("must be a version number (1 or more), not %d; leave it out (or null) to start the latest version", *v)
	}
	return *v, ""
}

type batchStartItem struct {
	IdempotencyKey *string         `json:"idempotency_key"`
	Version        *int            `json:"version"`
	Inputs         json.RawMessage `json:"inputs"`
	BusinessKey    *string         `json:"business_key"`
}

type batchStartRequest struct {
	Items []batchStartItem `json:"items"`
}

// batchItemJSON is one item's outcome in a batch answer: the status it
// would have had alone, and its result or its problem.
type batchItemJSON struct {
	Index    int            `json:"index"`
	Status   int            `json:"status"`
	Instance *instanceJSON  `json:"instance,omitempty"`
	Problem  map[string]any `json:"problem,omitempty"`
}

// startInstances starts up to engine.MaxBatch instances in one
// transaction; each item is answered on its own (201 created, 200
// replayed, or its problem), the request itself is 200.
func (a *API) startInstances() http.Handler {
	return a.handleIdempotent(func(w http.ResponseWriter, r *http.Request) error {
		if r.Header.Get("Idempotency-Key") != "" {
			// Ignoring it would let a client that retries a timed-out
			// batch by its header start every item twice.
			return fault.New(fault.BadRequest, "invalid_request", "a batch takes an idempotency key per item (items[].idempotency_key), not the Idempotency-Key header").
				WithErrors([]fault.FieldError{{Path: "Idempotency-Key", Message: "not taken by this route: give each item its idempotency_key"}})
		}
		req, err := httpjson.Decode[batchStartRequest](w, r, a.maxBody)
		if err != nil {
			return httpjson.UnknownHint(err, batchHints)
		}
		switch {
		case len(req.Items) == 0:
			return fault.New(fault.BadRequest, "invalid_request", "items must hold at least one start").
				WithErrors([]fault.FieldError{{Path: "/items", Message: "must hold 1 to " + strconv.Itoa(engine.MaxBatch) + " items"}})
		case len(req.Items) > engine.MaxBatch:
			return engine.BoundExceeded("items", engine.MaxBatch)
		}
		key := chi.URLParam(r, "key")
		reqs := make([]engine.StartRequest, len(req.Items))
		var errs []fault.FieldError
		for i, it := range req.Items {
			var idem string
			if it.IdempotencyKey != nil {
				idem = *it.IdempotencyKey
				if why := idempotencyKeyProblem(idem); why != "" {
					errs = append(errs, fault.FieldError{Path: "/items/" + strconv.Itoa(i) + "/idempotency_key", Message: why})
				}
			}
			version, bad := startVersion(it.Version)
			if bad != "" {
				errs = append(errs, fault.FieldError{Path: "/items/" + strconv.Itoa(i) + "/version", Message: bad})
			}
			reqs[i] = engine.StartRequest{ProcessKey: key, Version: version, Inputs: it.Inputs, BusinessKey: it.BusinessKey, IdempotencyKey: idem}
		}
		if len(errs) > 0 {
			return fault.New(fault.BadRequest, "invalid_request", "the batch is invalid").WithErrors(errs)
		}
		results, err := a.eng.StartInstances(r.Context(), reqs)
		if err != nil {
			return err
		}
		out := struct {
			Items []batchItemJSON `json:"items"`
		}{Items: make([]batchItemJSON, len(results))}
		for i, res := range results {
			item := batchItemJSON{Index: i}
			if res.Err != nil {
				err := res.Err
				if fe, ok := fault.As(err); ok && fe.Code == "idempotency_key_reused" && len(fe.Errors) == 0 {
					// The member to change, as a duplicate_item says it.
					err = fe.WithErrors([]fault.FieldError{{Path: "/idempotency_key", Message: "was used for a different request"}})
				}
				item.Status, item.Problem = httpjson.ItemProblemOf(r, a.logger, err, i)
			} else {
				item.Status = http.StatusOK
				if res.Created {
					item.Status = http.StatusCreated
				}
				inst := toInstanceJSON(res.Instance, false)
				item.Instance = &inst
			}
			out.Items[i] = item
		}
		httpjson.Encode(w, http.StatusOK, out)
		return nil
	})
}

// filterKeys are the keys a filter names, as given.
type filterKeys struct {
	Process, HeldAt, RetryingAt, Definition, Destination string
	Version, Revision                                    int
	Consumer                                             int64
}

// unknownKeyErrors names each key of k that u found nothing for, at its
// parameter (prefix + name): a key nothing has (a typo) would answer an
// empty list, or count 0, which reads as "none left" (an incident's end).
func unknownKeyErrors(u engine.UnknownKeys, prefix string, k filterKeys) []fault.FieldError {
	var errs []fault.FieldError
	meant := func(param string) string {
		if m, ok := u.Meant[param]; ok {
			return suggest.Meant(m)
		}
		return ""
	}
	switch {
	case u.Version:
		errs = append(errs, fault.FieldError{Path: prefix + "version", Message: fmt.Sprintf("process %q has no version %d", k.Process, k.Version)})
	case u.Process:
		errs = append(errs, fault.FieldError{Path: prefix + "process", Message: fmt.Sprintf("no process has the key %q%s", k.Process, meant("process"))})
	}
	if u.HeldAt {
		hint := meant("held_at")
		if hint == "" {
			// A node's name, most likely (the instance page says "held
			// at node check"): say what the filter takes.
			hint = " (held_at takes a definition's key: the one the node an instance is held at runs, not the node's name)"
		}
		errs = append(errs, fault.FieldError{Path: prefix + "held_at", Message: fmt.Sprintf("no definition has the key %q%s", k.HeldAt, hint)})
	}
	if u.RetryingAt {
		hint := meant("retrying_at")
		if hint == "" {
			hint = " (retrying_at takes a definition's key: the one the node whose retry waits runs, not the node's name)"
		}
		errs = append(errs, fault.FieldError{Path: prefix + "retrying_at", Message: fmt.Sprintf("no definition has the key %q%s", k.RetryingAt, hint)})
	}
	if u.RetryingAtPushed {
		errs = append(errs, fault.FieldError{Path: prefix + "retrying_at", Message: fmt.Sprintf("definition %q is only called by push nodes, which are never retried: none of its retries waits", k.RetryingAt)})
	}
	switch {
	case u.Revision:
		errs = append(errs, fault.FieldError{Path: prefix + "revision", Message: fmt.Sprintf("definition %q has no revision %d", k.Definition, k.Revision)})
	case u.Definition:
		errs = append(errs, fault.FieldError{Path: prefix + "definition", Message: fmt.Sprintf("no definition has the key %q%s", k.Definition, meant("definition"))})
	}
	if u.Consumer {
		errs = append(errs, fault.FieldError{Path: prefix + "consumer", Message: fmt.Sprintf("no consumer has the id %d", k.Consumer)})
	}
	if u.Destination {
		errs = append(errs, fault.FieldError{Path: prefix + "destination", Message: fmt.Sprintf("no destination has the name %q%s", k.Destination, meant("destination"))})
	}
	return errs
}
