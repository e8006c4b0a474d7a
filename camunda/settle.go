package camunda

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
	"github.com/relais/relais/internal/jsontree"
)

// taskID reads the task id of the path: an occurrence id, or no task at
// all (404, as for an unknown id).
func taskID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		return uuid.Nil, taskNotFound(chi.URLParam(r, "id"))
	}
	return id, nil
}

func taskNotFound(id string) *fault.Error {
	return fault.New(fault.NotFound, "not_found", "External task with id %s does not exist", id)
}

// taskError answers an occurrence the consumer may not see, or that does
// not exist, in Camunda's words; other errors pass.
func taskError(id uuid.UUID, err error) error {
	fe, ok := fault.As(err)
	switch {
	case ok && fe.Code == "not_found":
		return taskNotFound(id.String())
	case ok && fe.Code == "locked_by_other_worker":
		// The engine speaks of the native API's member.
		out := *fe
		out.Detail = strings.ReplaceAll(fe.Detail, "the worker_id that fetched it", "the workerId that fetched it")
		return &out
	case ok && fe.Code == "not_reserved":
		// A Camunda worker has no stream (Camunda QA).
		out := *fe
		out.Detail = strings.ReplaceAll(fe.Detail, "claim it first (a fetch, or a stream's assignment)", "fetch and lock it first")
		return &out
	}
	return err
}

func (f *Facade) ref(r *http.Request, workerID string) (engine.WorkerRef, error) {
	id, err := taskID(r)
	if err != nil {
		return engine.WorkerRef{}, err
	}
	if err := checkWorkerID("/workerId", workerID); err != nil {
		return engine.WorkerRef{}, err
	}
	p, _ := auth.FromContext(r.Context())
	// The facade notes refused reports itself, at the pointers its
	// client was told (/variables/x/value, not the engine's /outputs/x).
	return engine.WorkerRef{ConsumerID: p.ConsumerID, WorkerID: workerID, Occurrence: id, NotesRefusals: true}, nil
}

// refused notes on the attempt ref holds that its report was refused
// with err, which it returns: the facade refuses some reports before the
// engine sees them (a variable it cannot convert), and a Camunda client
// only logs the refusal, its lock then lapsing as if it never answered.
func (f *Facade) refused(r *http.Request, ref engine.WorkerRef, err error) error {
	if moot := f.moot(r, ref, err); moot != nil {
		return moot
	}
	f.eng.NoteRefusedReport(r.Context(), ref, err)
	return err
}

// moot returns why ref could not settle its task whatever its report
// carried (the task settled, its lock lapsed or another worker's), when
// err is a problem of the report itself, or nil: fixing the report would
// not help (Camunda QA: a completion sent again after its 204 was told a
// date did not convert, where Camunda says the task is gone).
func (f *Facade) moot(r *http.Request, ref engine.WorkerRef, err error) error {
	fe, ok := fault.As(err)
	if !ok || fe.Kind != fault.BadRequest && fe.Kind != fault.Unprocessable {
		return nil
	}
	standing := f.eng.Standing(r.Context(), ref)
	if _, ok := fault.As(standing); !ok {
		// Standing, or unknown (the database did not answer): the
		// report's own problem is still true.
		return nil
	}
	return taskError(ref.Occurrence, standing)
}

// refusedUnsupported refuses a report's member at path that Relais cannot
// honour, noting path as the refusal's pointer: the answer names it in its
// detail alone (see unsupported), the note keeps pointers only.
func (f *Facade) refusedUnsupported(r *http.Request, ref engine.WorkerRef, path, why string) error {
	err := unsupported(path, why)
	if moot := f.moot(r, ref, err); moot != nil {
		return moot
	}
	noted := *err
	noted.Errors = []fault.FieldError{{Path: path}}
	f.eng.NoteRefusedReport(r.Context(), ref, &noted)
	return err
}

type completeRequest struct {
	WorkerID       string                `json:"workerId"`
	Variables      map[string]variableIn `json:"variables"`
	LocalVariables map[string]variableIn `json:"localVariables"`
}

// complete settles the occurrence with the variables as its outputs,
// converted by the pinned revision's outputs contract and validated
// against it (a violation is 400 naming every pointer; the lock stays, so
// the worker may correct and complete again).
func (f *Facade) complete(w http.ResponseWriter, r *http.Request) error {
	req, err := httpjson.Decode[completeRequest](w, r, f.body)
	if err != nil {
		return err
	}
	ref, err := f.ref(r, req.WorkerID)
	if err != nil {
		return err
	}
	o, err := f.eng.ConsumerOccurrence(r.Context(), ref.ConsumerID, ref.Occurrence)
	if err != nil {
		return taskError(ref.Occurrence, err)
	}
	rev, err := f.eng.GetRevision(r.Context(), o.Definition, o.Revision)
	if err != nil {
		return err
	}
	outputs, err := outputsOf(req.Variables, req.LocalVariables, rev.Working.Outputs)
	if err != nil {
		return f.refused(r, ref, f.withContractProblems(err, outputs, rev, req.Variables, req.LocalVariables))
	}
	if _, err := f.eng.Complete(r.Context(), ref, outputs); err != nil {
		return f.refused(r, ref, taskError(ref.Occurrence, outputPaths(err, req.Variables, req.LocalVariables)))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// withContractProblems adds to a conversion's refusal what the contract
// finds wrong with the values that did convert (a missing output, an
// unknown variable, a wrong type), so that the worker fixes everything at
// once: reported after the conversions were fixed, it took a round more
// (Camunda QA). A variable that did not convert is judged only by its
// conversion.
func (f *Facade) withContractProblems(err error, converted json.RawMessage, rev *engine.Revision, variables, local map[string]variableIn) error {
	fe, ok := fault.As(err)
	if !ok || converted == nil {
		return err
	}
	_, ov, verr := f.eng.Validators(rev)
	if verr != nil {
		return err
	}
	failed := map[string]bool{}
	for _, e := range fe.Errors {
		if tokens, perr := jsontree.SplitPointer(e.Path); perr == nil && len(tokens) > 1 {
			failed[tokens[1]] = true
		}
	}
	out := *fe
	out.Errors = slices.Clone(fe.Errors)
	added := 0
	for _, v := range ov.Validate(converted) {
		if tokens, perr := jsontree.SplitPointer(v.Path); perr == nil && len(tokens) > 0 && failed[tokens[0]] {
			continue
		}
		out.Errors = append(out.Errors, fault.FieldError{Path: variablePath(v.Path, variables, local), Message: v.Message})
		added++
	}
	if added > 0 {
		out.Detail += fmt.Sprintf("; and the variables violate revision %d of %s", rev.Revision, rev.Key)
	}
	return &out
}

// outputPaths shows the engine's /outputs/x pointers where the worker
// gave x: /variables/x/value (or /localVariables/x/value, when only that
// list has it), as a conversion's refusal names it; a field the worker
// left out, /variables/x.
func outputPaths(err error, variables, local map[string]variableIn) error {
	fe, ok := fault.As(err)
	if !ok || fe.Code != "invalid_outputs" {
		return err
	}
	out := *fe
	out.Errors = make([]fault.FieldError, len(fe.Errors))
	for i, e := range fe.Errors {
		e.Path = variablePath(strings.TrimPrefix(e.Path, "/outputs"), variables, local)
		out.Errors[i] = e
	}
	out.Detail = strings.Replace(fe.Detail, "the outputs violate", "the variables violate", 1)
	return &out
}

// variablePath is the pointer into a completion's body of the output at
// pointer (/x/rest), x being the variable.
func variablePath(pointer string, variables, local map[string]variableIn) string {
	tokens, err := jsontree.SplitPointer(pointer)
	if err != nil || len(tokens) == 0 {
		return pointer
	}
	name, rest := tokens[0], tokens[1:]
	list := "variables"
	if _, inVariables := variables[name]; !inVariables {
		if _, inLocal := local[name]; inLocal {
			list = "localVariables"
		} else {
			return jsontree.Pointer("", list, name)
		}
	}
	return jsontree.Pointer("", append([]string{list, name, "value"}, rest...)...)
}

type failureRequest struct {
	WorkerID       string                `json:"workerId"`
	ErrorMessage   *string               `json:"errorMessage"`
	ErrorDetails   *string               `json:"errorDetails"`
	Retries        *jsonInt              `json:"retries"`
	RetryTimeout   *jsonInt              `json:"retryTimeout"`
	Variables      map[string]variableIn `json:"variables"`
	LocalVariables map[string]variableIn `json:"localVariables"`
}

// failure reports a failed execution with Camunda's meaning of retries:
// how many more times the task may run (0 makes the failure terminal: the
// process's on_error decides, by the code external_task_failure). Retries
// above the occurrence's budget leave the budget as it is (Relais never
// raises it). Without retries the failure is terminal, as in Camunda,
// whose REST API reads an absent retries as 0 (a primitive int): a worker
// that reports a failure without saying it may run again gets an incident,
// not its side effects repeated. retryTimeout (ms) delays the next offer,
// else the node's retry_delay applies.
func (f *Facade) failure(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeReport[failureRequest](w, r, f.body)
	if err != nil {
		return err
	}
	ref, err := f.ref(r, req.WorkerID)
	if err != nil {
		return err
	}
	if len(req.Variables) > 0 || len(req.LocalVariables) > 0 {
		// Named as sent: a report with localVariables alone was told of
		// /variables (Camunda QA).
		path := "/variables"
		if len(req.Variables) == 0 {
			path = "/localVariables"
		}
		return f.refusedUnsupported(r, ref, path, "a failure carries no outputs (the outputs contract applies to completions)")
	}
	retries := 0
	if req.Retries != nil {
		retries = int(*req.Retries)
	}
	if retries < 0 {
		return f.refused(r, ref, badRequest("/retries", "must be 0 or more"))
	}
	fl := engine.Failure{ErrorCode: FailureCode, Message: deref(req.ErrorMessage), AttemptsLeft: &retries, ClampAttemptsLeft: true, FinalDelayIgnored: true, Retryable: retries > 0}
	if req.RetryTimeout != nil {
		timeout := int64(*req.RetryTimeout)
		if ceiling := f.bounds.MaxRetryDelay.Milliseconds(); timeout > ceiling {
			// An exponential backoff's cap above Relais's ceiling: taken
			// as the ceiling, as retries above the budget are taken as
			// the budget. Refused, the report would be lost and the
			// lock's expiry spend the attempt anyway.
			f.logger.Info("a Camunda failure's retryTimeout is above Relais's ceiling; the ceiling is taken", "occurrence", ref.Occurrence,
				"retry_timeout_ms", timeout, "ceiling_ms", ceiling)
			timeout = ceiling
		}
		d, err := millis("/retryTimeout", &timeout, 0, true, f.bounds.MaxRetryDelay)
		if err != nil {
			return f.refused(r, ref, err)
		}
		fl.RetryDelay = &d
	}
	if _, err := f.eng.Fail(r.Context(), ref, fl); err != nil {
		return f.refused(r, ref, taskError(ref.Occurrence, err))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// reportText are the members of a failure that are a worker's diagnostic
// prose, which Camunda stores whatever they hold.
var reportText = []string{"/errorMessage", "/errorDetails"}

// decodeReport decodes a failure or BPMN error as strictly as any body,
// except that its diagnostic text (reportText) is repaired rather than
// refused: a JavaScript worker's message cut inside an emoji (an escaped
// lone surrogate), invalid UTF-8 or a NUL character become U+FFFD. A
// Camunda client does not rewrite a refused report: the refusal lost the
// message, and the lock's expiry then spent the attempt all the same.
func decodeReport[T any](w http.ResponseWriter, r *http.Request, maxBytes int64) (T, error) {
	body, err := httpjson.ReadBody(w, r, maxBytes)
	if err != nil {
		var v T
		return v, err
	}
	v, err := httpjson.DecodeBytes[T](body)
	fe, ok := fault.As(err)
	if !ok || fe.Code != "invalid_json" || len(fe.Errors) == 0 || slices.ContainsFunc(fe.Errors, func(e fault.FieldError) bool {
		return !slices.Contains(reportText, e.Path) || !textProblem(e.Message)
	}) {
		return v, err
	}
	// Only the text is at fault: encoding/json reads invalid UTF-8 and
	// lone surrogates as U+FFFD, NUL is replaced here, and the body so
	// repaired is judged as strictly as any other.
	var doc any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if dec.Decode(&doc) != nil {
		return v, err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return v, err
	}
	for _, p := range reportText {
		if s, ok := obj[p[1:]].(string); ok {
			obj[p[1:]] = strings.ReplaceAll(s, "\x00", "\uFFFD")
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(obj) != nil {
		return v, err
	}
	return httpjson.DecodeBytes[T](buf.Bytes())
}

// textProblem says whether a strict-JSON refusal is about a string's
// characters (what decodeReport repairs), not its structure.
func textProblem(msg string) bool {
	return msg == jsontree.MsgLoneSurrogate || msg == jsontree.MsgInvalidUTF8 || msg == jsontree.ErrNUL.Error()
}

type bpmnErrorRequest struct {
	WorkerID     string                `json:"workerId"`
	ErrorCode    string                `json:"errorCode"`
	ErrorMessage *string               `json:"errorMessage"`
	Variables    map[string]variableIn `json:"variables"`
}

// bpmnError fails the occurrence for good with the worker's error code, so
// the process's on_error map routes it by that code ({"CODE": node}).
func (f *Facade) bpmnError(w http.ResponseWriter, r *http.Request) error {
	req, err := decodeReport[bpmnErrorRequest](w, r, f.body)
	if err != nil {
		return err
	}
	ref, err := f.ref(r, req.WorkerID)
	if err != nil {
		return err
	}
	if len(req.Variables) > 0 {
		return f.refusedUnsupported(r, ref, "/variables", "a BPMN error carries no outputs; the error path may bind nodes.X.error.code and .message")
	}
	if req.ErrorCode == "" {
		return f.refused(r, ref, badRequest("/errorCode", "is required"))
	}
	fl := engine.Failure{ErrorCode: req.ErrorCode, Message: deref(req.ErrorMessage)}
	if _, err := f.eng.Fail(r.Context(), ref, fl); err != nil {
		return f.refused(r, ref, taskError(ref.Occurrence, renameFailurePaths(err)))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// renameFailurePaths shows the engine's /error_code as the request's
// /errorCode.
func renameFailurePaths(err error) error {
	fe, ok := fault.As(err)
	if !ok || len(fe.Errors) == 0 {
		return err
	}
	out := *fe
	out.Errors = make([]fault.FieldError, len(fe.Errors))
	for i, e := range fe.Errors {
		if e.Path == "/error_code" {
			e.Path = "/errorCode"
		}
		out.Errors[i] = e
	}
	return &out
}

type extendLockRequest struct {
	WorkerID    string   `json:"workerId"`
	NewDuration *jsonInt `json:"newDuration"`
}

// extendLock sets the worker's lock to newDuration (ms) from now.
func (f *Facade) extendLock(w http.ResponseWriter, r *http.Request) error {
	req, err := httpjson.Decode[extendLockRequest](w, r, f.body)
	if err != nil {
		return err
	}
	ref, err := f.ref(r, req.WorkerID)
	if err != nil {
		return err
	}
	var d time.Duration
	if req.NewDuration == nil {
		err = badRequest("/newDuration", "is required (milliseconds)")
	} else {
		d, err = lockMillis("/newDuration", (*int64)(req.NewDuration), 0, f.bounds.MaxLockDuration)
	}
	if err != nil {
		// A task settled, or whose lock lapsed or is another worker's,
		// is said so first, as to a report: fixing the duration would
		// not help (Camunda QA).
		if moot := f.moot(r, ref, err); moot != nil {
			return moot
		}
		return err
	}
	if _, err := f.eng.SetLock(r.Context(), ref, d); err != nil {
		return taskError(ref.Occurrence, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// unlock hands the reservation back without spending an attempt (a
// release), whichever worker of the consumer holds it; Camunda's unlock
// names no worker. An occurrence that holds no live lock is already
// unlocked: 204 as well, its waiting retry (if any) offered now.
func (f *Facade) unlock(w http.ResponseWriter, r *http.Request) error {
	id, err := taskID(r)
	if err != nil {
		return err
	}
	// Camunda's unlock takes no body; one sent anyway must be an empty
	// object, not something malformed or with members Relais would ignore.
	body, err := httpjson.ReadBody(w, r, f.body)
	if err != nil {
		return err
	}
	// Camunda's Java client sends the absent body as JSON null.
	if b := bytes.TrimSpace(body); len(b) > 0 && string(b) != "null" {
		r.Body = io.NopCloser(bytes.NewReader(body))
		if _, err := httpjson.Decode[struct{}](w, r, f.body); err != nil {
			return err
		}
	}
	p, _ := auth.FromContext(r.Context())
	o, err := f.eng.ConsumerOccurrence(r.Context(), p.ConsumerID, id)
	if err != nil {
		return taskError(id, err)
	}
	switch o.Status {
	case engine.StatusAvailable:
		if o.PastDeadline(f.eng.Now()) {
			// Past its deadline it fails: gone, as below, before the
			// timer fails it as after.
			return taskNotFound(id.String())
		}
		// A failure's retryTimeout holds it back: Camunda's unlock clears
		// the lock that failure set, and the task is fetchable at once
		// (a 204 that changed nothing let the retry wait on: QA).
		offered, err := f.eng.OfferRetryNow(r.Context(), id)
		if err != nil {
			return taskError(id, err)
		}
		if offered {
			f.logger.Info("camunda: an unlock offered a waiting retry now", "occurrence", id, "consumer", p.ConsumerID)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	case engine.StatusReserved:
	case engine.StatusDeferred:
		return fault.New(fault.Conflict, "not_reserved", "occurrence %s is deferred: it holds no lock; complete it or report its failure", id)
	default:
		return taskNotFound(id.String())
	}
	ref := engine.WorkerRef{ConsumerID: p.ConsumerID, WorkerID: deref(o.WorkerID), Occurrence: id}
	if _, err := f.eng.Release(r.Context(), ref); err != nil {
		if fault.HasCode(err, "lock_expired") {
			// It lapsed meanwhile: unlocked already.
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		// Past its deadline it fails, so it is gone (404, as a
		// completion is told), whether or not the timer failed it yet:
		// the answer must not depend on when the timer ran.
		return taskError(id, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
