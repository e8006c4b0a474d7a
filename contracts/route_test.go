package contracts

import (
	"errors"
	"reflect"
	"testing"
)

func TestRoute(t *testing.T) {
	t.Parallel()
	w := mustParseWorking(t, richWorking)
	if got, want := w.Routes(), []string{"approved", "rejected", "review"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Routes: got %v, want %v", got, want)
	}
	// Routes returns a copy: callers cannot alter the model.
	w.Routes()[0] = "changed"
	if w.Routes()[0] != "approved" {
		t.Fatal("Routes exposes the model's slice, want a copy")
	}

	got, err := w.Route([]byte(`{"decision":"review","crm_ref":"X"}`))
	if err != nil || got != "review" {
		t.Fatalf("Route: got %q, %v; want review, nil", got, err)
	}
	for _, bad := range []string{`{"crm_ref":"X"}`, `{"decision":"maybe"}`, `{"decision":1}`, `[]`} {
		if got, err := w.Route([]byte(bad)); err == nil || !errors.Is(err, ErrNoRoute) {
			t.Errorf("Route(%s): got %q, %v; want ErrNoRoute", bad, got, err)
		}
	}
	if _, err := w.Route([]byte(`{`)); err == nil {
		t.Error("Route(invalid json): got nil error, want one")
	}

	plain := mustParseWorking(t, `{"name":"x","inputs":{"fields":[]},"outputs":{"fields":[{"name":"d","type":"text"}]}}`)
	if got, err := plain.Route([]byte(`{"d":"x"}`)); got != "" || err != nil {
		t.Errorf("Route without routing output: got %q, %v; want \"\", nil", got, err)
	}
	if got := plain.Routes(); got != nil {
		t.Errorf("Routes without routing output: got %v, want nil", got)
	}
}
