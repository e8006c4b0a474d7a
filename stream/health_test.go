package stream

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
)

// A watch hears each change of PostgreSQL's reachability and of stalled
// writes, then the drain,
// and ends after saying NOT_SERVING for it, so that a drain waits for no
// watch.
func TestHealthWatch(t *testing.T) {
	t.Parallel()
	closing := make(chan struct{})
	s := &Service{health: newHealth(closing), reg: newRegistry(10, nil)}
	_, h := grpchealth.NewHandler(s.health)
	mux := httptest.NewServer(s.health.endWatches(h))
	defer mux.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := grpchealth.NewClient(mux.Client(), mux.URL)
	events := client.Watch(ctx, &grpchealth.CheckRequest{})
	next := func(step string) grpchealth.Status {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("%s: the watch ended", step)
			}
			if ev.Err != nil {
				t.Fatalf("%s: %v", step, ev.Err)
			}
			return ev.Response.Status
		case <-ctx.Done():
			t.Fatalf("%s: no status", step)
		}
		return 0
	}
	if got := next("first"); got != grpchealth.StatusServing {
		t.Fatalf("first status %v, want SERVING", got)
	}
	s.SetDatabaseUp(false)
	if got := next("database down"); got != grpchealth.StatusNotServing {
		t.Fatalf("database down: %v, want NOT_SERVING", got)
	}
	s.SetDatabaseUp(false) // no change: nothing sent
	s.SetDatabaseUp(true)
	if got := next("database up"); got != grpchealth.StatusServing {
		t.Fatalf("database up: %v, want SERVING", got)
	}
	s.SetWritesStalled(true)
	if got := next("writes stalled"); got != grpchealth.StatusNotServing {
		t.Fatalf("writes stalled: %v, want NOT_SERVING", got)
	}
	if got, err := client.Check(ctx, &grpchealth.CheckRequest{}); err != nil || got.Status != grpchealth.StatusNotServing {
		t.Fatalf("check while writes stall: %v %v, want NOT_SERVING", got, err)
	}
	s.SetWritesStalled(true) // no change: nothing sent
	s.SetWritesStalled(false)
	if got := next("writes flow again"); got != grpchealth.StatusServing {
		t.Fatalf("writes flow again: %v, want SERVING", got)
	}
	began := time.Now()
	close(closing)
	if got := next("drain"); got != grpchealth.StatusNotServing {
		t.Fatalf("drain: %v, want NOT_SERVING", got)
	}
	select {
	case ev, ok := <-events:
		if ok && ev.Err == nil {
			t.Fatalf("after the drain's status: %v, want the watch's end", ev.Response.Status)
		}
	case <-ctx.Done():
		t.Fatal("the watch did not end after the drain")
	}
	if d := time.Since(began); d >= watchFarewell {
		t.Errorf("the watch ended %s after the drain began, want its NOT_SERVING to end it at once", d)
	}

	if _, err := client.Check(ctx, &grpchealth.CheckRequest{Service: "nope"}); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("check of an unknown service: %v", err)
	}
	for ev := range client.Watch(ctx, &grpchealth.CheckRequest{Service: "nope"}) {
		if connect.CodeOf(ev.Err) != connect.CodeNotFound {
			t.Errorf("watch of an unknown service: %+v", ev)
		}
	}
}
