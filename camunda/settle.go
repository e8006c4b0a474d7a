package camunda

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/httpjson"
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
	if fe, ok := fault.As(err); ok && fe.Code == "not_found" {
		return taskNotFound(id.String())
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
	return engine.WorkerRef{ConsumerID: p.ConsumerID, WorkerID: workerID, Occurrence: id}, nil
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
		return err
	}
	if _, err := f.eng.Complete(r.Context(), ref, outputs); err != nil {
		return taskError(ref.Occurrence, outputPaths(err))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// outputPaths shows the engine's /outputs/x pointers as the contract's /x:
// the variable named x.
func outputPaths(err error) error {
	fe, ok := fault.As(err)
	if !ok || fe.Code != "invalid_outputs" {
		return err
	}
	out := *fe
	out.Errors = make([]fault.FieldError, len(fe.Errors))
	for i, e := range fe.Errors {
		e.Path = strings.TrimPrefix(e.Path, "/outputs")
		out.Errors[i] = e
	}
	out.Detail = strings.Replace(fe.Detail, "the outputs violate", "the variables violate", 1)
	return &out
}

type failureRequest struct {
	WorkerID       string                `json:"workerId"`
	ErrorMessage   *string               `json:"errorMessage"`
	ErrorDetails   *string               `json:"errorDetails"`
	Retries        *int                  `json:"retries"`
	RetryTimeout   *int64                `json:"retryTimeout"`
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
	req, err := httpjson.Decode[failureRequest](w, r, f.body)
	if err != nil {
		return err
	}
	ref, err := f.ref(r, req.WorkerID)
	if err != nil {
		return err
	}
	if len(req.Variables) > 0 || len(req.LocalVariables) > 0 {
		return unsupported("/variables", "a failure carries no outputs (the outputs contract applies to completions)")
	}
	retries := 0
	if req.Retries != nil {
		retries = *req.Retries
	}
	if retries < 0 {
		return badRequest("/retries", "must be 0 or more")
	}
	fl := engine.Failure{ErrorCode: FailureCode, Message: deref(req.ErrorMessage), AttemptsLeft: &retries, ClampAttemptsLeft: true, FinalDelayIgnored: true, Retryable: retries > 0}
	if req.RetryTimeout != nil {
		d, err := millis("/retryTimeout", req.RetryTimeout, 0, true, f.bounds.MaxRetryDelay)
		if err != nil {
			return err
		}
		fl.RetryDelay = &d
	}
	if _, err := f.eng.Fail(r.Context(), ref, fl); err != nil {
		return taskError(ref.Occurrence, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
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
	req, err := httpjson.Decode[bpmnErrorRequest](w, r, f.body)
	if err != nil {
		return err
	}
	ref, err := f.ref(r, req.WorkerID)
	if err != nil {
		return err
	}
	if len(req.Variables) > 0 {
		return unsupported("/variables", "a BPMN error carries no outputs; the error path may bind nodes.X.error.code and .message")
	}
	if req.ErrorCode == "" {
		return badRequest("/errorCode", "is required")
	}
	fl := engine.Failure{ErrorCode: req.ErrorCode, Message: deref(req.ErrorMessage)}
	if _, err := f.eng.Fail(r.Context(), ref, fl); err != nil {
		return taskError(ref.Occurrence, renameFailurePaths(err))
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
	WorkerID    string `json:"workerId"`
	NewDuration *int64 `json:"newDuration"`
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
	if req.NewDuration == nil {
		return badRequest("/newDuration", "is required (milliseconds)")
	}
	d, err := lockMillis("/newDuration", req.NewDuration, 0, f.bounds.MaxLockDuration)
	if err != nil {
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
// unlocked: 204 as well.
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
