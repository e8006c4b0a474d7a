package worker

import (
	"context"
	"encoding/json"
	"time"
)

// wire is how a task's outcome reaches Relais. Errors are *APIError for a
// refusal and *networkError when the answer was lost, whichever the wire.
type wire interface {
	complete(ctx context.Context, id string, req completeRequest) (completeResult, error)
	fail(ctx context.Context, id string, req failRequest) (failResult, error)
	release(ctx context.Context, id string, req workerRequest) error
	deferTask(ctx context.Context, id string, req deferRequest) (Deferral, error)
}

type completeResult struct {
	Status string  `json:"status"`
	Route  *string `json:"route"`
}

type failResult struct {
	Status       string     `json:"status"`
	AttemptsLeft int        `json:"attempts_left"`
	AvailableAt  *time.Time `json:"available_at"`
}

// restWire settles tasks through the REST pull routes.
type restWire struct{ w *Worker }

func (rw restWire) complete(ctx context.Context, id string, req completeRequest) (completeResult, error) {
	var res completeResult
	if b := rw.w.batch; b != nil {
		raw, err := b.do(ctx, &batchCall{id: id, attempt: req.Attempt, outputs: req.Outputs})
		if err == nil {
			err = decodeResult(raw, &res)
		}
		return res, err
	}
	err := rw.w.post(ctx, occurrencePath(id, "complete"), req, &res)
	return res, err
}

func (rw restWire) fail(ctx context.Context, id string, req failRequest) (failResult, error) {
	var res failResult
	if b := rw.w.batch; b != nil {
		raw, err := b.do(ctx, &batchCall{id: id, attempt: req.Attempt, failure: &req})
		if err == nil {
			err = decodeResult(raw, &res)
		}
		return res, err
	}
	err := rw.w.post(ctx, occurrencePath(id, "fail"), req, &res)
	return res, err
}

// decodeResult reads a settlement's answer; one that cannot be read is
// as good as lost (retried, and answered as a replay).
func decodeResult(raw []byte, out any) error {
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &networkError{err}
	}
	return nil
}

func (rw restWire) release(ctx context.Context, id string, req workerRequest) error {
	return rw.w.post(ctx, occurrencePath(id, "release"), req, nil)
}

func (rw restWire) deferTask(ctx context.Context, id string, req deferRequest) (Deferral, error) {
	var res Deferral
	err := rw.w.post(ctx, occurrencePath(id, "defer"), req, &res)
	return res, err
}
