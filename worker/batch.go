package worker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// settleBatch gathers the completions and failures of fetched tasks that
// finish within SettleWindow of each other and reports them in one POST
// /api/v1/pull/settle: one request and one database transaction for many
// tasks, where each would otherwise cost its own. Each outcome is answered
// as the single route would answer it (its result, or its refusal as an
// *APIError), so the caller's handling, retries included, is unchanged.
// Against a Relais without the batch route (404, 405) or when a whole batch
// is refused (400, or 413: too large together, maybe for one outcome's
// outputs), outcomes go one by one through the single routes.
type settleBatch struct {
	w      *Worker
	window time.Duration
	max    int
	// single is set once the server showed it has no batch route.
	single atomic.Bool

	mu      sync.Mutex
	pending []*batchCall
	timer   *time.Timer
}

// batchCall is one outcome waiting for its batch.
type batchCall struct {
	id       string
	attempt  int32           // see completeRequest
	outputs  json.RawMessage // set: a completion
	failure  *failRequest    // set: a failure
	result   json.RawMessage
	err      error
	done     chan struct{}
	answered bool
}

type settleItem struct {
	ID           string          `json:"id"`
	Attempt      int32           `json:"attempt,omitempty"`
	Outputs      json.RawMessage `json:"outputs,omitempty"`
	ErrorCode    *string         `json:"error_code,omitempty"`
	Message      string          `json:"message,omitempty"`
	Retryable    bool            `json:"retryable,omitempty"`
	RetryDelay   string          `json:"retry_delay,omitempty"`
	AttemptsLeft *int            `json:"attempts_left,omitempty"`
}

type settleItemResult struct {
	Index   int             `json:"index"`
	Status  int             `json:"status"`
	Result  json.RawMessage `json:"result"`
	Problem json.RawMessage `json:"problem"`
}

// do sends c with the next batch and waits for its answer.
func (b *settleBatch) do(ctx context.Context, c *batchCall) (json.RawMessage, error) {
	c.done = make(chan struct{})
	b.mu.Lock()
	b.pending = append(b.pending, c)
	switch {
	case len(b.pending) >= b.max:
		batch := b.take()
		b.mu.Unlock()
		go b.send(batch)
	case b.timer == nil:
		b.timer = time.AfterFunc(b.window, b.flush)
		b.mu.Unlock()
	default:
		b.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.result, c.err
	case <-ctx.Done():
		// The batch may still settle it: the caller's retry will be
		// answered as a replay.
		return nil, &networkError{ctx.Err()}
	}
}

// take removes the pending calls; b.mu is held.
func (b *settleBatch) take() []*batchCall {
	batch := b.pending
	b.pending = nil
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return batch
}

func (b *settleBatch) flush() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	if len(batch) > 0 {
		b.send(batch)
	}
}

// send reports batch in one request, or one by one when the server cannot
// take it as a batch.
func (b *settleBatch) send(batch []*batchCall) {
	if len(batch) == 1 || b.single.Load() {
		for _, c := range batch {
			b.sendOne(c)
		}
		return
	}
	items := make([]settleItem, len(batch))
	for i, c := range batch {
		items[i] = settleItem{ID: c.id, Attempt: c.attempt, Outputs: c.outputs}
		if f := c.failure; f != nil {
			code := f.ErrorCode
			items[i] = settleItem{ID: c.id, Attempt: c.attempt, ErrorCode: &code, Message: f.Message, Retryable: f.Retryable, RetryDelay: f.RetryDelay}
			if f.AttemptsLeft > 0 {
				left := int(f.AttemptsLeft)
				items[i].AttemptsLeft = &left
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	var res struct {
		Items []settleItemResult `json:"items"`
	}
	err := b.w.post(ctx, "/api/v1/pull/settle", map[string]any{"worker_id": b.w.cfg.WorkerID, "items": items}, &res)
	var ae *APIError
	switch {
	case errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed):
		// A Relais before batch settlements.
		b.single.Store(true)
		fallthrough
	case errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusRequestEntityTooLarge):
		// The batch as a whole was refused (too large together, maybe
		// for one outcome's outputs): each outcome alone gets its own
		// answer.
		for _, c := range batch {
			b.sendOne(c)
		}
		return
	case err != nil:
		for _, c := range batch {
			c.answer(nil, err)
		}
		return
	}
	for _, r := range res.Items {
		if r.Index < 0 || r.Index >= len(batch) {
			continue
		}
		c := batch[r.Index]
		if r.Status >= 200 && r.Status < 300 {
			c.answer(r.Result, nil)
			continue
		}
		c.answer(nil, problemOf(r.Status, r.Problem, r.Index))
	}
	for _, c := range batch {
		// An item the answer left out is as good as lost: retried.
		c.answer(nil, &networkError{errors.New("relais: the batch answer has no result for this outcome")})
	}
}

// sendOne reports c through its single route.
func (b *settleBatch) sendOne(c *batchCall) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	var out json.RawMessage
	var err error
	if c.failure != nil {
		err = b.w.post(ctx, occurrencePath(c.id, "fail"), c.failure, &out)
	} else {
		err = b.w.post(ctx, occurrencePath(c.id, "complete"), completeRequest{WorkerID: b.w.cfg.WorkerID, Outputs: c.outputs, Attempt: c.attempt}, &out)
	}
	c.answer(out, err)
}

func (c *batchCall) answer(result json.RawMessage, err error) {
	if c.answered {
		return
	}
	c.answered = true
	c.result, c.err = result, err
	close(c.done)
}

// problemOf is the *APIError of item index's problem, as its single route
// would have answered it: Relais points an item's errors into the batch
// (/items/3/outputs/crm_id), a handler's outcome knows nothing of it
// (/outputs/crm_id).
func problemOf(status int, doc json.RawMessage, index int) *APIError {
	ae := &APIError{Status: status}
	var p struct {
		Code   string       `json:"code"`
		Detail string       `json:"detail"`
		Errors []FieldError `json:"errors"`
	}
	if json.Unmarshal(doc, &p) == nil {
		ae.Code, ae.Detail, ae.Errors = p.Code, p.Detail, p.Errors
	}
	prefix := "/items/" + strconv.Itoa(index)
	for i, e := range ae.Errors {
		if rest, ok := strings.CutPrefix(e.Path, prefix); ok && (rest == "" || rest[0] == '/') {
			ae.Errors[i].Path = rest
		}
	}
	return ae
}
