package worker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Outcomes of fetched tasks that finish together are reported in one POST
// /api/v1/pull/settle, each answered as alone: completions complete their
// instance, a business failure fails its own.
func TestOutcomesAreReportedInBatches(t *testing.T) {
	t.Parallel()
	r := newRelais(t, map[string]any{"max_attempts": 1})
	var ids []string
	for i := range 24 {
		ids = append(ids, r.start(t, fmt.Sprint("c", i)))
	}
	w, err := New(Config{URL: r.env.URL, Token: r.consumer, Protocol: ProtocolLongPoll, Concurrency: 12,
		SettleWindow: 20 * time.Millisecond, WorkerID: "batcher", Wait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.Handle(def, nil, func(ctx context.Context, task *Task) (any, error) {
		var in struct {
			CompanyName string `json:"company_name"`
		}
		if err := task.Decode(&in); err != nil {
			return nil, err
		}
		if in.CompanyName == "c3" {
			return nil, Fail("CRM_REFUSED", "refused")
		}
		return map[string]any{"result": "created", "crm_id": "C-" + in.CompanyName}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	for i, id := range ids {
		want := "completed"
		if i == 3 {
			want = "failed"
		}
		if got := r.env.WaitEnded(id, 15*time.Second)["status"]; got != want {
			t.Errorf("instance c%d: %v, want %s", i, got, want)
		}
	}
	batches, singles := 0, 0
	for _, line := range strings.Split(r.env.Logs.String(), "\n") {
		switch {
		case strings.Contains(line, "route=/api/v1/pull/settle "), strings.HasSuffix(line, "route=/api/v1/pull/settle"):
			batches++
		case strings.Contains(line, "route=/api/v1/pull/occurrences/{id}/complete"), strings.Contains(line, "route=/api/v1/pull/occurrences/{id}/fail"):
			singles++
		}
	}
	if batches == 0 || batches >= len(ids) {
		t.Errorf("%d batch reports and %d single ones for %d outcomes; want them gathered", batches, singles, len(ids))
	}
}

// A batch item's problem reaches the handler's outcome as its single route
// would have answered it: pointers into the outcome, not into the batch.
func TestBatchItemProblemPointsIntoTheOutcome(t *testing.T) {
	doc := []byte(`{"code":"invalid_outputs","detail":"d","errors":[{"path":"/items/2/outputs/result","message":"m"},` +
		`{"path":"/items/2/outputs","message":"m"},{"path":"/items/2","message":"m"},{"path":"/items/20/outputs","message":"m"}]}`)
	ae := problemOf(422, doc, 2)
	var got []string
	for _, e := range ae.Errors {
		got = append(got, e.Path)
	}
	if want := []string{"/outputs/result", "/outputs", "", "/items/20/outputs"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("paths %q, want %q", got, want)
	}
	if ae.Status != 422 || ae.Code != "invalid_outputs" {
		t.Errorf("problem %d %s, want 422 invalid_outputs", ae.Status, ae.Code)
	}
}

// Outputs a Go struct marshals with null members (a nil slice, map or
// pointer without omitempty) are sent without them: no Relais type takes
// null, and an optional field left out is valid where null failed the
// task for good. A "null" inside a string stays.
func TestOutputsDropNullMembers(t *testing.T) {
	t.Parallel()
	type item struct {
		X *int `json:"x"`
		Y int  `json:"y"`
	}
	out := struct {
		Matched []string          `json:"matched_on"`
		Extra   map[string]string `json:"extra"`
		Note    string            `json:"note"`
		Nested  struct {
			Tags []int `json:"tags"`
		} `json:"nested"`
		Items []item `json:"items"`
		Link  string `json:"link"`
	}{Note: "null", Items: []item{{Y: 1}}, Link: "a<b&c"}
	got, err := encodeOutputs(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"items":[{"y":1}],"link":"a<b&c","nested":{},"note":"null"}`; string(got) != want {
		t.Errorf("outputs %s, want %s", got, want)
	}
	plain, err := encodeOutputs(map[string]any{"b": 1.50, "a": "x"})
	if err != nil || string(plain) != `{"a":"x","b":1.5}` {
		t.Errorf("outputs without nulls: %s %v, want them as marshalled", plain, err)
	}
}
