package console

import (
	"context"
	"maps"
	"net/http"
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
)

// Operator actions (DESIGN §12): retry or abandon a held instance, stop a
// running or held one, each with a required reason recorded in the audit
// log, on one instance or on every instance a filter matches. Every action
// is a confirmation page (GET) and a form (POST, CSRF checked by
// requireSession, operators and admins only by requireOperator) that
// redirects when it is applied (Post/Redirect/Get). None completes an
// occurrence.

// bulkPath is the bulk action's confirmation page and form.
const bulkPath = instancesPath + "/bulk"

// actionLabel is the button that opens an action's confirmation.
func actionLabel(ctx context.Context, a engine.Action) string {
	switch a {
	case engine.ActionRetry:
		return T(ctx, "Retry…")
	case engine.ActionAbandon:
		return T(ctx, "Abandon…")
	}
	return T(ctx, "Stop this instance…")
}

// actionName is an action in the audit log.
func actionName(ctx context.Context, a string) string {
	switch engine.Action(a) {
	case engine.ActionRetry:
		return T(ctx, "retry")
	case engine.ActionAbandon:
		return T(ctx, "abandon")
	case engine.ActionStop:
		return T(ctx, "stop")
	case engine.ActionErase:
		return T(ctx, "erase")
	}
	return a
}

// bulkActionLabel offers an action on every instance a filter matches;
// a stop names the status the filter keeps, if any.
func bulkActionLabel(ctx context.Context, a engine.Action, f instanceFilter) string {
	status := f.keptStatus()
	switch {
	case bringsForward(a, f):
		return T(ctx, "Retry now every instance whose retry waits…")
	case a == engine.ActionRetry:
		return T(ctx, "Retry every held instance…")
	case a == engine.ActionAbandon:
		return T(ctx, "Abandon every held instance…")
	case status == engine.InstanceHeld:
		return T(ctx, "Stop every held instance…")
	case status == engine.InstanceRunning:
		return T(ctx, "Stop every running instance…")
	}
	return T(ctx, "Stop every running or held instance…")
}

// reasonForm is what a form asking for the reason of an operator action
// carries, one instance's or a bulk action's: the field and its bounds,
// the buttons, and a refusal, if any.
type reasonForm struct {
	Error string
	// ReasonInvalid marks the reason field as what the error is about.
	ReasonInvalid bool
	Detail        string // the engine's own words, in English, when no translation explains the refusal
	FormAction    string
	CSRF          string
	ReasonLabel   string
	ReasonHint    string
	ReasonMax     string // the textarea's maxlength: engine.MaxReason characters
	Reason        string
	Confirm       string
	Cancel        string
	BackHref      string
	Danger        bool
}

// newReasonForm is the reason form posting to action, labelled label,
// whose cancel link goes back to back.
func newReasonForm(r *http.Request, action, label, back, cancel string) reasonForm {
	ctx := r.Context()
	f := reasonForm{FormAction: action, CSRF: currentOf(ctx).csrf, ReasonLabel: label,
		ReasonHint: T(ctx, "Say why, for whoever reads the log later: at most %d characters. Every operator reads it, and it is kept whatever the retention: write no customer data in it.", engine.MaxReason),
		ReasonMax:  strconv.Itoa(engine.MaxReason), BackHref: back, Cancel: cancel}
	if r.Method == http.MethodGet {
		// A reason posted as the session ended, brought back through
		// sign-in (see redirectToSignIn).
		f.Reason = r.URL.Query().Get(draftReasonParam)
	}
	return f
}

// actionView is the confirmation of an action on one instance.
type actionView struct {
	Chrome      chrome
	Action      string
	Question    string
	Consequence string
	reasonForm
	// Closed is set when the action can no longer apply (another operator
	// acted first, the occurrence cannot be retried): the page says what
	// happened and keeps the reason typed, but offers no form to post.
	Closed      bool
	NotRecorded string
	// LastSeen is the id of the newest audit record on the instance when
	// the page was made ("0": none), posted back: an action recorded since
	// refuses the form (acted_meanwhile) rather than act on an incident
	// the operator did not see.
	LastSeen string
	// RetryNow marks a retry of a running instance's waiting occurrence,
	// posted back: a refusal then says what became of that occurrence,
	// not that the instance is no longer held.
	RetryNow bool
}

// actionView asks to apply a to inst, at o: the occurrence a held
// instance waits at, or the one a running instance's retry brings forward.
func (c *Console) actionView(r *http.Request, a engine.Action, inst engine.Instance, o engine.Occurrence) actionView {
	ctx := r.Context()
	id := inst.ID
	v := actionView{Action: string(a),
		reasonForm: newReasonForm(r, instanceHref(id)+"/"+string(a), T(ctx, "Reason (recorded in the audit log)"), instanceHref(id), T(ctx, "Keep it running"))}
	if inst.Status == engine.InstanceHeld {
		v.Cancel = T(ctx, "Keep it held")
	}
	heldAt := o.Node
	switch {
	case a == engine.ActionRetry && inst.Status == engine.InstanceRunning:
		v.RetryNow = true
		v.Chrome = c.chrome(r, T(ctx, "Retry process instance %s", id), "instances")
		v.Question = T(ctx, "Retry now? The occurrence at node %s waits for its retry, due %s; it is offered now, its attempts left unchanged.", o.Node, clockTime(ctx, o.AvailableAt))
		v.Consequence = T(ctx, "A worker may take it at once. Its earlier attempts and last error stay in its history. Nothing is completed on anyone’s behalf.")
		v.Confirm = T(ctx, "Retry now")
	case a == engine.ActionRetry:
		v.Chrome = c.chrome(r, T(ctx, "Retry process instance %s", id), "instances")
		v.Question = T(ctx, "Retry this instance? Its failed occurrence at node %s is offered again with a fresh budget of attempts.", heldAt)
		v.Consequence = T(ctx, "Workers may take it again (a push occurrence calls its destination again). Its earlier attempts and last error stay in its history. Nothing is completed on anyone’s behalf.")
		v.Confirm = T(ctx, "Retry the instance")
	case a == engine.ActionAbandon:
		v.Chrome = c.chrome(r, T(ctx, "Abandon process instance %s", id), "instances")
		v.Question = T(ctx, "Abandon this instance? It fails with the error code abandoned.")
		v.Consequence = T(ctx, "Its failed occurrence stays as it is and nothing is completed on its behalf. An abandoned instance cannot be resumed.")
		v.Confirm = T(ctx, "Abandon the instance")
		v.Danger = true
	default:
		v.Chrome = c.chrome(r, T(ctx, "Stop process instance %s", id), "instances")
		v.Question = T(ctx, "Stop this instance? Its open occurrences are cancelled.")
		// A push call in flight is cut short, its request already sent
		// (console QA: a payment's stop said nothing of it).
		v.Consequence = T(ctx, "Workers that hold one of them are told at once on a stream, at their next lock extension or report when long polling, and their results are refused; a push call in flight is aborted, though its destination may already have acted on the request (a card charged: check there). Nothing is completed on their behalf, and a stopped instance cannot be resumed.")
		v.Confirm = T(ctx, "Stop the instance")
		v.Danger = true
	}
	return v
}

// actionOf reads the {action} of the URL.
func actionOf(r *http.Request) (engine.Action, bool) {
	return engine.ParseAction(chi.URLParam(r, "action"))
}

// heldOccurrence is the occurrence a held instance waits at (see
// engine.HeldStep).
func heldOccurrence(occs []engine.Occurrence) (engine.Occurrence, bool) {
	steps := make([]engine.Step, len(occs))
	for i, o := range occs {
		steps[i] = o.Step()
	}
	if i, ok := engine.HeldStep(steps); ok {
		return occs[i], true
	}
	return engine.Occurrence{}, false
}

// waitingRetry is an occurrence of a running instance that waits out a
// retry delay at now: what an operator's retry offers at once.
func waitingRetry(occs []engine.Occurrence, now time.Time) (engine.Occurrence, bool) {
	for _, o := range occs {
		if o.Status == engine.StatusAvailable && o.Attempts > 0 && o.AvailableAt.After(now) {
			return o, true
		}
	}
	return engine.Occurrence{}, false
}

// heldAt is the occurrence a held instance waits at, or else the one a
// running instance's retry would bring forward (see waitingRetry), if any.
func (c *Console) heldAt(ctx context.Context, id uuid.UUID) (engine.Occurrence, bool, error) {
	occs, err := c.eng.InstanceOccurrences(ctx, id)
	if err != nil {
		return engine.Occurrence{}, false, err
	}
	if o, ok := heldOccurrence(occs); ok {
		return o, true, nil
	}
	o, ok := waitingRetry(occs, c.eng.Now())
	return o, ok, nil
}

// appliesNow says whether a applies to one instance in status, waiting
// saying whether an occurrence of it waits out a retry delay: a retry of
// a running instance brings that forward.
func appliesNow(a engine.Action, status string, waiting bool) bool {
	return actionAppliesTo(a, status) || a == engine.ActionRetry && status == engine.InstanceRunning && waiting
}

// notRetryable says why a held instance's retry is not offered.
func notRetryable(ctx context.Context, node string) string {
	return T(ctx, "This instance cannot be retried: its occurrence at node %s failed before any attempt (its inputs could not be built), so it would fail the same way. Abandon or stop it.", node)
}

// instanceActionConfirm asks before acting. An instance the action no
// longer applies to goes back to its page, which says why.
func (c *Console) instanceActionConfirm(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a, ok := actionOf(r)
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if !ok || err != nil {
		c.notFound(w, r)
		return
	}
	// seen guards against acting on what changed meanwhile: a misspelt
	// one would drop the guard unsaid.
	if errs := queryProblems(ctx, r.URL.RawQuery, "seen", draftReasonParam); len(errs) > 0 {
		c.cannotActOnInstance(w, r, id, errs)
		return
	}
	inst, err := c.eng.GetInstance(ctx, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	held, found, err := c.heldAt(ctx, id)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	if !appliesNow(a, inst.Status, found) {
		text := notApplicable(ctx, a, inst.Status)
		if last := c.actedSince(ctx, id, seenID(r.URL.Query().Get("seen"))); last != nil {
			text = noLongerApplies(ctx, a, inst.Status, last)
		}
		c.redirectWithFlash(w, r, instanceHref(id), flash{Text: text, Warning: true})
		return
	}
	if a == engine.ActionRetry && !engine.Retryable(held) {
		c.redirectWithFlash(w, r, instanceHref(id), flash{Text: notRetryable(ctx, held.Node), Warning: true})
		return
	}
	v := c.actionView(r, a, inst, held)
	if a == engine.ActionRetry && inst.Status == engine.InstanceHeld && held.Mode == engine.ModePush && held.ErrorCode != nil && mayHaveActed(*held.ErrorCode) {
		// Said where it is confirmed (operator QA: only the stop's page
		// warned of a card charged).
		if *held.ErrorCode == engine.CodeInvalidOutputs {
			v.Consequence += " " + T(ctx, "Its last call was answered as a success, with outputs the contract refused: the destination most likely acted. Check at the destination before retrying, or it acts twice (a card charged twice).")
		} else {
			v.Consequence += " " + T(ctx, "Its last call may have been carried out all the same (its answer was lost, or came after the timeout): check at the destination that it did not act before retrying, or it acts twice (a card charged twice).")
		}
	}
	last, err := c.eng.LastAction(ctx, id)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	v.LastSeen = "0"
	if last != nil {
		v.LastSeen = strconv.FormatInt(last.ID, 10)
	}
	// Opened from the instance's page, which says what it showed: an
	// action recorded since sends the operator back to look again.
	if seen := r.URL.Query().Get("seen"); seen != "" && seen != v.LastSeen && last != nil {
		c.redirectWithFlash(w, r, instanceHref(id), flash{Text: actedMeanwhile(ctx, last), Warning: true})
		return
	}
	c.render(w, r, http.StatusOK, actionPage(v))
}

// cannotActOnInstance refuses an action request carrying parameters its
// page does not read (400): nothing is done, and the page leads back to
// the instance.
func (c *Console) cannotActOnInstance(w http.ResponseWriter, r *http.Request, id uuid.UUID, errs []string) {
	ctx := r.Context()
	msg := strings.Join(append(errs, T(ctx, "Nothing was done.")), " ")
	c.errorPageBack(w, r, http.StatusBadRequest, T(ctx, "Cannot act on this instance"), msg, "instances", T(ctx, "Back to the instance"), instanceHref(id))
}

// actedMeanwhile says that someone acted on an instance after the
// operator's page showed it, naming the action.
func actedMeanwhile(ctx context.Context, last *engine.OperatorAction) string {
	return T(ctx, "Someone acted on this instance after this page was opened (%s by %s, %s). Nothing was done: look at it again before deciding.",
		actionName(ctx, last.Action), last.ActorName, formatTime(ctx, last.At).Text)
}

// seenID reads the id of the newest audit record a page showed (0 for
// none), as its links and forms carry it; nil when there is none to read
// (a form made before they carried it).
func seenID(s string) *int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return nil
	}
	return &n
}

// actedSince is the newest operator action on an instance when it is not
// the one the operator's page showed (seen); nil when it is, when seen is
// nil, or when the log cannot be read (the caller then says what it can
// without it).
func (c *Console) actedSince(ctx context.Context, id uuid.UUID, seen *int64) *engine.OperatorAction {
	if seen == nil {
		return nil
	}
	last, err := c.eng.LastAction(ctx, id)
	if err != nil {
		c.logger.Warn("console: audit log unavailable", "err", err)
		return nil
	}
	if last == nil || last.ID == *seen {
		return nil
	}
	return last
}

// noLongerApplies says that an action no longer applies to an instance,
// now in status, because of last, recorded after the operator's page
// showed it: who did what, as actedMeanwhile says it.
func noLongerApplies(ctx context.Context, a engine.Action, status string, last *engine.OperatorAction) string {
	state, what, who, when := statusLabel(ctx, status), actionName(ctx, last.Action), last.ActorName, formatTime(ctx, last.At).Text
	if a == engine.ActionStop {
		return T(ctx, "This instance has already ended (it is %s now): someone acted on it after this page was opened (%s by %s, %s). Nothing was done.", state, what, who, when)
	}
	return T(ctx, "This instance is no longer held (it is %s now): someone acted on it after this page was opened (%s by %s, %s). Nothing was done.", state, what, who, when)
}

// notApplicable says why an action does not apply to an instance now.
func notApplicable(ctx context.Context, a engine.Action, status string) string {
	s := statusLabel(ctx, status)
	switch a {
	case engine.ActionRetry:
		if status == engine.InstanceFailed {
			return T(ctx, "This instance is %s, not held: there is nothing to retry. A failure ends its instance unless the node’s on_error leads to hold (an incident waiting for an operator); start a new instance (with a new Idempotency-Key, or none) to redo the work.", s)
		}
		if status == engine.InstanceRunning {
			// A running instance's retry brings a waiting occurrence
			// forward: none waits.
			return T(ctx, "This instance is running and none of its occurrences waits for a retry: there is nothing to retry.")
		}
		return T(ctx, "This instance is %s, not held: there is nothing to retry.", s)
	case engine.ActionAbandon:
		return T(ctx, "This instance is %s, not held: there is nothing to abandon.", s)
	}
	return T(ctx, "This instance is %s: there is nothing to stop.", s)
}

// instanceAct applies the action (Post/Redirect/Get). A refusal re-renders
// the confirmation with what happened, the reason kept: another operator
// acted first (409), the occurrence cannot be retried (409), the reason is
// missing (400).
func (c *Console) instanceAct(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a, ok := actionOf(r)
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if !ok || err != nil {
		c.notFound(w, r)
		return
	}
	// Its address may be the confirmation's own, seen included (a form
	// posts to it); the form's check is last_action.
	if errs := append(queryProblems(ctx, r.URL.RawQuery, "seen"), paramProblems(ctx, r.PostForm, csrfField, "last_action", "reason", "retry_now")...); len(errs) > 0 {
		c.cannotActOnInstance(w, r, id, errs)
		return
	}
	p, _ := auth.FromContext(ctx)
	reason := formReason(r)
	before, err := c.eng.GetInstance(ctx, id)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	held, _, err := c.heldAt(ctx, id)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	node := held.Node
	retryNow := a == engine.ActionRetry && r.PostFormValue("retry_now") == "1"
	// A form made before this check existed carries none: not checked.
	lastSeen := seenID(r.PostFormValue("last_action"))
	// A retry asked to bring a waiting retry forward applies to a running
	// instance only: held meanwhile, a retry would give it a fresh budget
	// the operator never confirmed.
	while := ""
	if retryNow {
		while = engine.InstanceRunning
	}
	inst, applied, err := c.eng.ActSeenWhile(ctx, engine.Actor{TokenID: p.TokenID, Name: p.Name}, a, id, reason, lastSeen, while)
	if err != nil {
		fe, ok := shownRefusal(err)
		if !ok {
			c.fail(w, r, err)
			return
		}
		now, gerr := c.eng.GetInstance(ctx, id)
		if gerr != nil {
			now = before
		}
		v := c.actionView(r, a, now, held)
		v.Reason = reason
		waiting := false
		if a == engine.ActionRetry && now.Status == engine.InstanceRunning {
			// A retry brought forward applies while something still waits.
			_, waiting, _ = c.heldAt(ctx, id)
		}
		if !appliesNow(a, now.Status, waiting) || fe.Code == "not_retryable" {
			// Offering the form again would only be refused again; its
			// question would name no node (the instance is held nowhere).
			v.close(ctx)
		}
		// Offered again, the form still carries what the operator saw.
		v.LastSeen = r.PostFormValue("last_action")
		status := http.StatusConflict
		switch fe.Code {
		case "acted_meanwhile":
			// No form: the operator looks at the instance again (its page
			// lists the action) before deciding anew.
			v.close(ctx)
			v.Error = T(ctx, "Someone acted on this instance after this page was opened. Nothing was done: look at it again before deciding.")
			if last, err := c.eng.LastAction(ctx, id); err == nil && last != nil {
				v.Error = actedMeanwhile(ctx, last)
			}
		case "not_held", "instance_ended":
			if retryNow {
				v.Error = retryNowRefused(ctx, now.Status)
				if last := c.actedSince(ctx, id, lastSeen); last != nil {
					// A colleague's retry offered it meanwhile: named, as
					// any action recorded since is (on-call QA).
					v.Error = actedMeanwhile(ctx, last)
				}
				break
			}
			// The engine compares what the form saw only while the action
			// still applies: one that no longer does most likely follows
			// a colleague's action, named as when it still applies.
			if last := c.actedSince(ctx, id, lastSeen); last != nil {
				v.Error = noLongerApplies(ctx, a, now.Status, last)
			} else if fe.Code == "not_held" {
				v.Error = T(ctx, "This instance is no longer held (it is %s now): someone may have acted on it first. Nothing was done.", statusLabel(ctx, now.Status))
			} else {
				v.Error = T(ctx, "This instance has already ended; there is nothing to stop.")
			}
		case "not_retryable":
			v.Error = T(ctx, "Its occurrence failed before any attempt: its inputs could not be built, so a retry would fail the same way. Abandon or stop the instance instead. Nothing was done.")
		default:
			status = v.refuse(ctx, fe, reason)
		}
		c.render(w, r, status, actionPage(v))
		return
	}
	msg := flash{}
	switch {
	case !applied:
		// Someone else stopped it first: a warning, with the reason typed
		// shown as not recorded, as when another action comes too late.
		msg = flash{Text: T(ctx, "This instance was already stopped; nothing changed and nothing was recorded."), Warning: true,
			Reason: reason, NotRecorded: T(ctx, "The reason you gave, not recorded:")}
		if last := c.actedSince(ctx, id, lastSeen); last != nil && last.Action == string(engine.ActionStop) {
			// Stopped after this page was opened: by whom, as a late
			// retry or abandon is told.
			who, when := last.ActorName, formatTime(ctx, last.At).Text
			msg.Text = T(ctx, "This instance was already stopped, by %s at %s; nothing changed and nothing was recorded.", who, when)
		}
	case retryNow:
		msg.Text = T(ctx, "Retried now: the occurrence at node %s is offered at once. Recorded in the audit log.", node)
	case a == engine.ActionRetry:
		msg.Text = T(ctx, "Retried: the occurrence at node %s is offered again. Recorded in the audit log.", node)
	case a == engine.ActionAbandon:
		msg.Text = T(ctx, "Abandoned: the instance failed with the error code abandoned. Recorded in the audit log.")
	default:
		msg.Text = T(ctx, "Stopped: the instance and its open occurrences are cancelled. Recorded in the audit log.")
	}
	c.logger.Info("console: operator action", "action", a, "instance", id, "applied", applied, "status", inst.Status, "by", p.Name)
	c.redirectWithFlash(w, r, instanceHref(id), msg)
}

// retryNowRefused says why a retry of a running instance's waiting
// occurrence found nothing to bring forward, the instance now in status:
// it was never held, so "no longer held" would not say what happened.
func retryNowRefused(ctx context.Context, status string) string {
	if status == engine.InstanceHeld {
		return T(ctx, "This instance is held now: its occurrence failed again since this page was opened (its attempts spent, or a failure that is not retried). Nothing was done: look at it again before retrying, which would give it a fresh budget.")
	}
	if status == engine.InstanceRunning {
		// Its retry came due, or a worker took it, meanwhile.
		return T(ctx, "None of its occurrences waits for a retry any more: it was offered, or taken by a worker, meanwhile. Nothing was done.")
	}
	state := statusLabel(ctx, status)
	return T(ctx, "This instance has ended (it is %s now): nothing waits for a retry any more. Nothing was done.", state)
}

// shownRefusal is err as a refusal a confirmation page says in its own
// words; ok is false for what the error pages say: not found, a failure of
// Relais, an unavailable database (the 503 page, not a refusal).
func shownRefusal(err error) (fe *fault.Error, ok bool) {
	fe, ok = fault.As(err)
	return fe, ok && fe.Kind != fault.NotFound && fe.Kind != fault.Internal && fe.Kind != fault.Unavailable
}

// close leaves the confirmation without its form: the action can no
// longer apply, and the reason typed is shown as not recorded.
func (v *actionView) close(ctx context.Context) {
	v.Closed = true
	v.NotRecorded = T(ctx, "The reason you gave, not recorded:")
	v.Cancel = T(ctx, "Back to the instance")
}

// refuse says on the confirmation why the engine refused fe that no case
// of its own explains, and returns the page's status: the reason (400),
// or a refusal in general words with the engine's detail (409).
func (v *actionView) refuse(ctx context.Context, fe *fault.Error, reason string) int {
	if fe.Code == "invalid_request" {
		v.Error, v.ReasonInvalid = reasonRefused(ctx, reason)
		if !v.ReasonInvalid {
			v.Detail = fe.Detail
		}
		return http.StatusBadRequest
	}
	v.Error = T(ctx, "Relais refused the action. Nothing was done.")
	v.Detail = fe.Detail
	return http.StatusConflict
}

// reasonRefused says why the engine refused an action's request
// (invalid_request) when its reason is the cause: none given, or longer
// than engine.MaxReason characters (counted as the engine does), saying
// by how much. ok is false for another cause, said in general words.
func reasonRefused(ctx context.Context, reason string) (msg string, ok bool) {
	switch n := utf8.RuneCountInString(reason); {
	case strings.TrimSpace(reason) == "":
		return T(ctx, "Give a reason: it is recorded in the audit log (at most %d characters). Nothing was done.", engine.MaxReason), true
	case n > engine.MaxReason:
		return T(ctx, "The reason is too long: %d characters, for at most %d. Shorten it. Nothing was done.", n, engine.MaxReason), true
	}
	return T(ctx, "Relais refused the action. Nothing was done."), false
}

// formReason is the reason a form posted, its line breaks as the
// textarea counted them against maxlength: a browser sends each one as
// CR LF, two characters where the limit counted one.
func formReason(r *http.Request) string {
	return strings.ReplaceAll(r.PostFormValue("reason"), "\r\n", "\n")
}

// bulkView is the confirmation of an action on every instance a filter
// matches.
type bulkView struct {
	Chrome      chrome
	Action      string
	Question    string
	FilterLabel string
	Filter      []fact
	Count       string
	CountValue  string
	Nothing     string
	// Groups say what the count is made of, by process and error code,
	// the largest first; GroupsCut that only the largest are listed.
	GroupsLabel, GroupProcess, GroupErrorCode, GroupCount string
	Groups                                                []bulkGroup
	GroupsCut                                             string
	// LeftOut says how many held instances the filter matches that a
	// retry cannot offer again (they failed before any attempt) and leaves
	// out of the count.
	LeftOut string
	// MayHaveActed warns a retry that some of the calls it would make
	// again may have been carried out already.
	MayHaveActed string
	// Unfiltered warns that nothing but a status narrows the action: it
	// applies to every process's instances.
	Unfiltered string
	Changed    string
	Hidden     []option // the filter's fields, carried through the form
	// BulkID names the action before it runs, so that the confirmation
	// can link to its audit records: a long action outlives a page (or a
	// proxy) that gives up waiting for it.
	BulkID string
	// Long warns of an action that takes a while; FollowHref and Follow
	// link to its records as they are written.
	Long, FollowHref, Follow string
	reasonForm
}

// bulkCostPerInstance is what a bulk action takes per instance, as measured
// on the reference machine: enough to warn of a wait, not to time it.
const bulkCostPerInstance = 500 * time.Microsecond

// longBulk is the estimated wait past which the confirmation warns of it.
const longBulk = 5 * time.Second

// reconfirmWithin bounds how old a bring-forward's count may be for the
// console to confirm, itself, the smaller count it finds at the
// confirmation: past it, the operator sees the new count.
const reconfirmWithin = 5 * time.Minute

// bulkParams are the parameters of the bulk confirmation: the action and
// the filter's criteria, no page (it acts on every instance the filter
// matches); bulkFields are the fields of its form.
var (
	bulkParams = append([]string{"action"}, instanceCriteria...)
	bulkFields = append([]string{csrfField, "confirm_count", "bulk_id", countedAtField, "reason"}, bulkParams...)
)

// bulkAction reads the action and filter of a bulk request (query or
// form), validated.
func bulkAction(ctx context.Context, get func(string) string) (engine.Action, instanceFilter, engine.InstanceFilter, []string) {
	f := instanceFilterFrom(get)
	f.Page, f.Limit = page{}, ""
	ef, problems := f.engineFilter(ctx)
	errs := problems.Texts
	ef.Limit = 0
	a, ok := engine.ParseAction(get("action"))
	if !ok {
		errs = append(errs, T(ctx, "Unknown action."))
	} else if a == engine.ActionAbandon && f.RetryingAt != "" {
		errs = append(errs, T(ctx, "Abandoning applies to held instances, and this filter keeps running instances whose retry waits."))
	} else if slices.Contains(instanceStatuses, f.Status) && !bulkApplies(a, f) {
		// An unknown status was refused already, in words of its own.
		errs = append(errs, notApplicableToStatus(ctx, a, f.Status))
	}
	return a, f, ef, errs
}

func notApplicableToStatus(ctx context.Context, a engine.Action, status string) string {
	s := statusLabel(ctx, status)
	if a == engine.ActionStop {
		return T(ctx, "Stopping applies to running or held instances, not %s ones.", s)
	}
	if a == engine.ActionRetry {
		return T(ctx, "Retrying applies to held instances, or to running ones whose retry waits, not %s ones.", s)
	}
	return T(ctx, "Abandoning applies to held instances, not %s ones.", s)
}

// bringsForward reports whether a over f brings running instances'
// waiting retries forward, as the engine decides it
// (engine.Action.BringsForward).
func bringsForward(a engine.Action, f instanceFilter) bool {
	return a.BringsForward(engine.InstanceFilter{Status: f.Status, RetryingAt: f.RetryingAt})
}

// overWaitingRetries reports whether a over f takes running instances
// whose retry waits, as the engine decides it
// (engine.Action.OverWaitingRetries).
func overWaitingRetries(a engine.Action, f instanceFilter) bool {
	return a.OverWaitingRetries(engine.InstanceFilter{Status: f.Status, RetryingAt: f.RetryingAt})
}

// keptStatus is the status the instances f matches are in, when one: its
// status; running when it keeps the instances a retry waits on; held when
// it names where they are held or the code they failed with (a stop acts
// on no failed instance, ended, and a running one has no error code).
func (f instanceFilter) keptStatus() string {
	switch {
	case f.Status != "":
		return f.Status
	case f.RetryingAt != "":
		return engine.InstanceRunning
	case f.HeldAt != "" || f.ErrorCode != "":
		return engine.InstanceHeld
	}
	return ""
}

// bulkView builds the confirmation for count matching instances.
// countedAtField carries, through a bulk confirmation's form, the moment
// its count was read (see engine.InstanceFilter.PinMatched).
const countedAtField = "counted_at"

// bulkView builds the confirmation for count matching instances, counted
// at countedAt.
func (c *Console) bulkView(r *http.Request, a engine.Action, f instanceFilter, count int64, countedAt time.Time) bulkView {
	ctx := r.Context()
	v := bulkView{Action: string(a), FilterLabel: T(ctx, "Filter"), CountValue: strconv.FormatInt(count, 10),
		reasonForm: newReasonForm(r, bulkPath, T(ctx, "Reason (recorded in the audit log for every instance)"), f.href(), T(ctx, "Back to the list")),
		BulkID:     uuid.Must(uuid.NewV7()).String()}
	if wait := time.Duration(count) * c.bulkCost; wait >= longBulk {
		about := approxDuration(ctx, wait)
		v.Long = T(ctx, "This takes about %s. Keep this page open until it answers: if it stops waiting first, the action still runs to its end.", about)
		v.FollowHref, v.Follow = auditPath+"?bulk="+v.BulkID, T(ctx, "Follow it in the audit log (new tab)")
	}
	n := count
	switch {
	case bringsForward(a, f):
		v.Chrome = c.chrome(r, T(ctx, "Retry now every instance this filter matches whose retry waits"), "instances")
		v.Question = T(ctx, "Each one’s occurrence waiting out a retry delay is offered now, its attempts left unchanged: its workers take it at once. If the service it calls still fails, that attempt fails too and spends one of those left. Nothing is completed on anyone’s behalf.")
		v.Count = T(ctx, "%d running instances are waiting for a retry.", n)
		v.Confirm = T(ctx, "Retry %d instances now", n)
	case a == engine.ActionRetry:
		v.Chrome = c.chrome(r, T(ctx, "Retry every held instance this filter matches"), "instances")
		v.Question = T(ctx, "Each one’s failed occurrence is offered again with a fresh budget of attempts. Nothing is completed on anyone’s behalf.")
		v.Count = T(ctx, "%d held instances match now.", n)
		v.Confirm = T(ctx, "Retry %d instances", n)
	case a == engine.ActionAbandon:
		v.Chrome = c.chrome(r, T(ctx, "Abandon every held instance this filter matches"), "instances")
		v.Question = T(ctx, "Each one fails with the error code abandoned and cannot be resumed.")
		v.Count = T(ctx, "%d held instances match now.", n)
		v.Confirm = T(ctx, "Abandon %d instances", n)
		v.Danger = true
	default:
		// The filter's status, when it has one, is what matches: "running
		// or held" would promise instances it leaves out.
		switch f.keptStatus() {
		case engine.InstanceHeld:
			v.Chrome = c.chrome(r, T(ctx, "Stop every held instance this filter matches"), "instances")
			v.Count = T(ctx, "%d held instances match now.", n)
		case engine.InstanceRunning:
			v.Chrome = c.chrome(r, T(ctx, "Stop every running instance this filter matches"), "instances")
			v.Count = T(ctx, "%d running instances match now.", n)
		default:
			v.Chrome = c.chrome(r, T(ctx, "Stop every running or held instance this filter matches"), "instances")
			v.Count = T(ctx, "%d running or held instances match now.", n)
		}
		v.Question = T(ctx, "Each one and its open occurrences are cancelled; a stopped instance cannot be resumed.")
		v.Confirm = T(ctx, "Stop %d instances", n)
		v.Danger = true
	}
	if count == 0 {
		v.Nothing = T(ctx, "Nothing to do: no instance this action applies to matches the filter.")
		if f.ErrorCode != "" {
			// A count of 0 reads as the incident's end (verifier QA).
			v.Nothing += " " + T(ctx, "An error code is matched exactly, capitals included.")
		}
	}
	crit := f.criteria()
	switch {
	case len(crit) == 1 && crit.Has("status") && bringsForward(a, f):
		// An error code is refused over running instances.
		v.Unfiltered = T(ctx, "No process, definition, business key or creation date narrows this filter: it applies to the instances of every process.")
	case len(crit) == 0 || len(crit) == 1 && crit.Has("status"):
		v.Unfiltered = T(ctx, "No process, business key, error code or creation date narrows this filter: it applies to the instances of every process.")
	}
	// The criteria given, then the others in one line: listed each as
	// "any", eight rows pushed the count below a phone's first screen
	// (operator QA).
	status := ""
	if f.Status != "" {
		status = statusLabel(ctx, f.Status)
	}
	criteria := []fact{
		{Label: T(ctx, "Process"), Value: f.Process, Code: true},
		{Label: T(ctx, "Version"), Value: f.Version, TestID: "bulk-filter-version"},
		{Label: T(ctx, "Status"), Value: status},
		{Label: T(ctx, "Business key"), Value: f.BusinessKey, Code: true},
		{Label: T(ctx, "Error code"), Value: f.ErrorCode, Code: true},
		{Label: T(ctx, "Held at a node of"), Value: f.HeldAt, Code: true},
		{Label: T(ctx, "Waiting for a retry at a node of"), Value: f.RetryingAt, Code: true},
		{Label: T(ctx, "Created from"), Value: f.CreatedFrom},
		{Label: T(ctx, "Created to"), Value: f.CreatedTo},
	}
	for _, c := range criteria {
		if c.Value != "" {
			v.Filter = append(v.Filter, c)
		}
	}
	if len(v.Filter) < len(criteria) {
		v.Filter = append(v.Filter, fact{Label: T(ctx, "Other criteria"), Value: T(ctx, "none given"), TestID: "bulk-filter-others"})
	}
	for _, k := range slices.Sorted(maps.Keys(crit)) {
		v.Hidden = append(v.Hidden, option{Value: crit.Get(k), Label: k})
	}
	v.Hidden = append(v.Hidden, option{Value: countedAt.UTC().Format(time.RFC3339Nano), Label: countedAtField})
	return v
}

// bulkGroup is one line of a bulk action's breakdown.
type bulkGroup struct {
	// Href lists the group's instances; Label names the link for a screen
	// reader, which lists links out of their table (the number shown in
	// it).
	Process, ErrorCode, Count, Href, Label string
}

// maxBulkGroups bounds the breakdown a bulk confirmation shows.
const maxBulkGroups = 10

// whatMatches says what the count is made of: the instances by process
// and error code and, for a retry, those it leaves out.
func (c *Console) whatMatches(ctx context.Context, v *bulkView, a engine.Action, f instanceFilter, ef engine.InstanceFilter, count int64, b engine.Breakdown) error {
	if count > 0 {
		v.GroupsLabel = T(ctx, "By process and error code")
		v.GroupProcess, v.GroupErrorCode, v.GroupCount = T(ctx, "Process"), T(ctx, "Error code"), T(ctx, "Instances")
		if b.Truncated {
			v.GroupsCut = T(ctx, "The %d largest groups; the filter matches more.", maxBulkGroups)
		}
		for _, g := range b.Groups {
			// Held instances have an error code and running ones none:
			// each group's list shows its own.
			list := f
			list.Process, list.ErrorCode, list.Status = g.ProcessKey, "", engine.InstanceRunning
			row := bulkGroup{Process: g.ProcessKey, Count: number(ctx, g.Count)}
			if overWaitingRetries(a, f) {
				// Running instances, grouped by the code their waiting
				// occurrence failed with, which the instances list cannot
				// filter by: the group's list is of those occurrences.
				if g.ErrorCode != nil {
					row.ErrorCode = *g.ErrorCode
				}
				if f.Version == "" && f.CreatedFrom == "" && f.CreatedTo == "" {
					// The occurrences list takes the rest of the filter;
					// with a version or creation dates, the instances
					// list (every code) keeps them.
					row.Href = occurrenceFilter{Definition: f.RetryingAt, Process: g.ProcessKey, BusinessKey: f.BusinessKey, ErrorCode: row.ErrorCode, WaitingRetry: "true"}.href()
				}
			} else if g.ErrorCode != nil {
				list.ErrorCode, list.Status, row.ErrorCode = *g.ErrorCode, engine.InstanceHeld, *g.ErrorCode
			}
			if row.Href == "" {
				row.Href = list.href()
			}
			// A number alone said nothing out of its row (a11y QA); the
			// number last, as a count reads without a plural to agree.
			process, code, n := row.Process, row.ErrorCode, row.Count
			row.Label = T(ctx, "Instances of %s: %s", process, n)
			if code != "" {
				row.Label = T(ctx, "Instances of %s with error code %s: %s", process, code, n)
			}
			v.Groups = append(v.Groups, row)
		}
		if a == engine.ActionStop && b.Calling > 0 {
			// As the one instance's stop page warns (on-call QA: the
			// bulk stop of checkouts said nothing of a card charged).
			v.MayHaveActed = T(ctx, "%d of them are calling a destination now: a stop aborts the call, but the destination may already have acted on the request (a card charged: check with it).", b.Calling)
		}
		if a == engine.ActionRetry && b.MayHaveActed > 0 {
			// Said where it is confirmed, counted over every group, not
			// those shown (operator QA: only the stop's page warned of a
			// card charged; verifier QA: one group past the tenth said
			// nothing).
			v.MayHaveActed = T(ctx, "%d of them are held at a push call that may have been carried out all the same: it ended outcome_unknown or deadline_exceeded (its answer was lost, or came after the timeout), or invalid_outputs (the destination answered a success whose outputs the contract refused). Check at the destination that it did not act before retrying, or it acts twice (a card charged twice).", b.MayHaveActed)
		}
	}
	return c.leaveOut(ctx, v, a, ef, count)
}

// mayHaveActed reports whether a push call that failed with code may
// have been carried out all the same: its answer lost, too late, or a
// success whose outputs the contract refused (evaluator QA: the checkout
// example refused an order its card was charged for).
func mayHaveActed(code string) bool {
	return code == engine.CodeOutcomeUnknown || code == engine.CodeDeadlineExceeded || code == engine.CodeInvalidOutputs
}

// leaveOut says, for a bulk retry, how many held instances f matches
// that it leaves out because their occurrence failed before any attempt:
// the count confirmed leaves them out, so they are not reported as
// skipped either. An abandon applies to every held instance: the
// difference of the two counts is those instances.
func (c *Console) leaveOut(ctx context.Context, v *bulkView, a engine.Action, f engine.InstanceFilter, retryable int64) error {
	if a != engine.ActionRetry || a.BringsForward(f) {
		return nil
	}
	held, err := c.eng.CountForAction(ctx, engine.ActionAbandon, f)
	if err != nil {
		return err
	}
	if n := held - retryable; n > 0 {
		v.LeftOut = T(ctx, "%d more held instances failed before any attempt (their inputs could not be built): they cannot be retried and are left out. Abandon or stop them.", n)
	}
	return nil
}

// bulkConfirm counts what the action would change and asks to confirm
// that count with a reason.
func (c *Console) bulkConfirm(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a, f, ef, errs := bulkAction(ctx, r.URL.Query().Get)
	// A parameter the filter does not read would leave it wider than the
	// operator meant: no count, no form.
	errs = append(queryProblems(ctx, r.URL.RawQuery, append(slices.Clip(bulkParams), draftReasonParam)...), errs...)
	if len(errs) == 0 {
		unknown, err := c.unknownKeys(ctx, ef)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		errs = unknown.Texts
	}
	if len(errs) > 0 {
		c.instancesErrorPage(w, r, http.StatusBadRequest, T(ctx, "Cannot act on this filter"), strings.Join(errs, " "))
		return
	}
	countedAt := c.eng.BulkCountedAt(ctx)
	ef.PinMatched(countedAt)
	b, err := c.eng.BreakdownForAction(ctx, a, ef, maxBulkGroups)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	v := c.bulkView(r, a, f, b.Count, countedAt)
	if err := c.whatMatches(ctx, &v, a, f, ef, b.Count, b); err != nil {
		c.serverError(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, bulkPage(v))
}

// unknownKeys refuses, as the API does, a filter naming a process, a
// process version or a definition nothing has: a typo counts 0, which
// reads as the incident's end.
func (c *Console) unknownKeys(ctx context.Context, ef engine.InstanceFilter) (filterProblems, error) {
	u, err := c.eng.UnknownFilterKeys(ctx, ef)
	if err != nil {
		return filterProblems{}, err
	}
	return unknownKeyMessages(ctx, u, ef.ProcessKey, ef.Version, ef.HeldAt, ef.RetryingAt, "", 0), nil
}

// unknownOccurrenceKeys is unknownKeys for the occurrences list's filter.
func (c *Console) unknownOccurrenceKeys(ctx context.Context, ef engine.OccurrenceFilter) (filterProblems, error) {
	u, err := c.eng.UnknownOccurrenceKeys(ctx, ef)
	if err != nil {
		return filterProblems{}, err
	}
	errs := unknownKeyMessages(ctx, u, ef.ProcessKey, 0, "", "", ef.Definition, ef.Revision)
	if u.Consumer {
		errs.add(T(ctx, "Unknown consumer."), "consumer")
	}
	if u.Destination {
		errs.add(withMeant(ctx, u, T(ctx, "Unknown destination “%s”.", ef.Destination), "destination"), "destination")
	}
	return errs, nil
}

// withMeant is msg with the key u says param's is likely a typo of, as a
// start's refusal says it.
func withMeant(ctx context.Context, u engine.UnknownKeys, msg, param string) string {
	if m, ok := u.Meant[param]; ok {
		return msg + " " + T(ctx, "Did you mean “%s”?", m)
	}
	return msg
}

// unknownKeyMessages says which of the keys u found nothing for.
func unknownKeyMessages(ctx context.Context, u engine.UnknownKeys, process string, version int, heldAt, retryingAt, definition string, revision int) filterProblems {
	var errs filterProblems
	meant := func(msg, param string) string { return withMeant(ctx, u, msg, param) }
	switch {
	case u.Version:
		errs.add(T(ctx, "Process %s has no version %d.", process, version), "version")
	case u.Process:
		errs.add(meant(T(ctx, "No process has the key “%s”.", process), "process"), "process")
	}
	noDefinition := func(key string) string { return T(ctx, "No definition has the key “%s”.", key) }
	if u.HeldAt {
		msg := meant(noDefinition(heldAt), "held_at")
		if _, guessed := u.Meant["held_at"]; !guessed {
			// A node's name, most likely (the instance page says "Held at
			// node check"), as the API says (verifier QA).
			msg += " " + T(ctx, "This filter takes the key of a definition: the one the node an instance is held at runs, not the node’s name.")
		}
		errs.add(msg, "held_at")
	}
	if u.RetryingAt {
		errs.add(meant(noDefinition(retryingAt), "retrying_at"), "retrying_at")
	}
	if u.RetryingAtPushed {
		errs.add(T(ctx, "Definition %s is only called by push nodes, which are never retried: none of its retries waits.", retryingAt), "retrying_at")
	}
	switch {
	case u.Revision:
		errs.add(T(ctx, "Definition %s has no revision %d.", definition, revision), "revision")
	case u.Definition:
		errs.add(meant(noDefinition(definition), "definition"), "definition")
	}
	return errs
}

// bulkAct applies the action to every instance the filter matches, if the
// count the operator confirmed still holds; otherwise it shows the new
// count to confirm again (409) and applies nothing. Applied, it redirects
// to the audit records of this bulk action, with what was applied and
// skipped (instances that changed meanwhile).
func (c *Console) bulkAct(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	a, f, ef, errs := bulkAction(ctx, r.PostFormValue)
	errs = append(formProblems(ctx, r, bulkFields...), errs...)
	if len(errs) > 0 {
		c.instancesErrorPage(w, r, http.StatusBadRequest, T(ctx, "Cannot act on this filter"), strings.Join(errs, " "))
		return
	}
	confirm, err := strconv.ParseInt(r.PostFormValue("confirm_count"), 10, 64)
	if err != nil || confirm < 0 {
		c.instancesErrorPage(w, r, http.StatusBadRequest, T(ctx, "Cannot act on this filter"), T(ctx, "The confirmed count is missing: start again from the list."))
		return
	}
	// The moment the confirmed count was read: instances created since
	// are not the operator's to act on now. A form without it (a page
	// from before it was sent) counts everything, as it did.
	countedAt := c.eng.Now()
	unpinned := ef
	if at, err := time.Parse(time.RFC3339Nano, r.PostFormValue(countedAtField)); err == nil {
		countedAt = at
		ef.PinMatched(at)
	}
	// The id the confirmation linked to; a form without one (or a
	// mangled one) gets a new id rather than a refusal.
	bulkID, _ := uuid.Parse(r.PostFormValue("bulk_id"))
	p, _ := auth.FromContext(ctx)
	reason := formReason(r)
	actor := engine.Actor{TokenID: p.TokenID, Name: p.Name}
	res, err := c.eng.ActOnFilter(ctx, actor, a, ef, reason, confirm, bulkID)
	cameDue := int64(0)
	if fe, ok := fault.As(err); ok && fe.Code == "count_changed" && bringsForward(a, f) && ef.MatchedBefore != nil &&
		c.eng.BulkCountedAt(ctx).Sub(countedAt) <= reconfirmWithin {
		// Pinned to the count's moment, a bring-forward's count only
		// shrinks: retries came due on their own (an outage's backoff
		// outruns an operator typing a reason), and those left waited
		// when it was read. Applied to them, once, rather than asked
		// again, unless none is left or the count is old.
		if n, ok := fe.Extra["count"].(int64); ok && n < confirm && n > 0 {
			cameDue = confirm - n
			res, err = c.eng.ActOnFilter(ctx, actor, a, ef, reason, n, bulkID)
		}
	}
	if err != nil {
		fe, isFault := fault.As(err)
		if !isFault || fe.Kind == fault.Internal {
			c.serverError(w, r, err)
			return
		}
		count := confirm
		switch fe.Code {
		case "count_changed":
			if n, ok := fe.Extra["count"].(int64); ok {
				count = n
			}
		case "bulk_exists":
			// The form sent again: what still matches is the count to
			// confirm, under a new id (this one names the action that ran).
			if count, err = c.eng.CountForAction(ctx, a, ef); err != nil {
				c.serverError(w, r, err)
				return
			}
		}
		v := c.bulkView(r, a, f, count, countedAt)
		if bulkID != uuid.Nil && fe.Code != "bulk_exists" {
			// Nothing was applied: the id a tab opened earlier follows
			// stays the action's.
			v.BulkID = bulkID.String()
			if v.FollowHref != "" {
				v.FollowHref = auditPath + "?bulk=" + v.BulkID
			}
		}
		v.Reason = reason
		b, err := c.eng.BreakdownForAction(ctx, a, ef, maxBulkGroups)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		if err := c.whatMatches(ctx, &v, a, f, ef, count, b); err != nil {
			c.serverError(w, r, err)
			return
		}
		status := http.StatusConflict
		switch fe.Code {
		case "count_changed":
			was := confirm
			v.Changed = T(ctx, "The count changed since it was taken (it was %d): instances were settled, retried or acted on meanwhile. Nothing was done; check the new count and confirm again.", was)
			if bringsForward(a, f) && ef.MatchedBefore != nil {
				// The count is pinned to its moment: retries that came
				// due and failed again since wait again, counted by the
				// list but not here (verifier QA: "nothing to do" beside a
				// list of them).
				if now, err := c.eng.CountForAction(ctx, a, unpinned); err == nil && now > count {
					again := now - count
					v.Changed += " " + T(ctx, "%d more wait a retry again since the count (theirs came due and failed again): go back to the list and count again to bring them forward too.", again)
				}
			}
		case "bulk_exists":
			// The same form sent again (a double click, a reload): its id
			// names the action that ran, which Relais checks before the
			// count.
			v.Changed = T(ctx, "This bulk action was already applied (the form was sent again): its records are in the audit log. Nothing more was done.")
		case "invalid_request":
			status = http.StatusBadRequest
			v.Error, v.ReasonInvalid = reasonRefused(ctx, reason)
			if !v.ReasonInvalid {
				v.Detail = fe.Detail
			}
		default:
			status = http.StatusBadRequest
			v.Error = T(ctx, "Relais refused the action. Nothing was done.")
			v.Detail = fe.Detail
		}
		c.render(w, r, status, bulkPage(v))
		return
	}
	applied, skipped := res.Applied, res.Skipped
	name := actionName(ctx, string(a))
	msg := T(ctx, "Bulk %s applied to %d instances.", name, applied)
	if bringsForward(a, f) {
		msg = T(ctx, "Retries brought forward for %d instances: their workers take them now.", applied)
		if cameDue > 0 {
			msg += " " + T(ctx, "%d more no longer waited as counted: their retry came due, or they ended or were acted on meanwhile.", cameDue)
		}
	}
	if skipped > 0 {
		if overWaitingRetries(a, f) {
			msg += " " + T(ctx, "%d skipped: they changed after the count (settled, acted on by someone else, or their retry came due).", skipped)
		} else {
			msg += " " + T(ctx, "%d skipped: they changed after the count (settled, or acted on by someone else).", skipped)
		}
	}
	c.redirectWithFlash(w, r, auditPath+"?bulk="+res.ID.String(), flash{Text: msg})
}

// bulkReasonDescribedBy is the bulk reason's aria-describedby: its hint,
// and what was refused (a missing reason, a count that changed).
func bulkReasonDescribedBy(v bulkView) string {
	ids := "bulk-reason-hint"
	if v.Error != "" {
		ids += " bulk-error"
	}
	if v.Changed != "" {
		ids += " bulk-changed"
	}
	return ids
}
