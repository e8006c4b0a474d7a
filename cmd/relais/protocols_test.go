package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthv1 "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/relais/relais/internal/dbtest"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
	"github.com/relais/relais/proto/relais/worker/v1/workerv1connect"
)

// crmConsumer creates a consumer granted add_company_to_crm and returns
// its token.
func crmConsumer(t *testing.T, base string) string {
	t.Helper()
	return must(t, 201, callH(t, "POST", base+"/api/v1/consumers", bootstrap, map[string]any{"name": "c",
		"grants": []any{map[string]any{"definition": "add_company_to_crm", "revisions": "all"}}}))["token"].(string)
}

// grpcConn is a grpc-go client of the serve at base, over h2c.
func grpcConn(t *testing.T, base string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// subscribeCRM opens a worker stream "w" of one slot on
// add_company_to_crm, as a grpc-go client would.
func subscribeCRM(t *testing.T, ctx context.Context, conn *grpc.ClientConn, consumer string) grpc.ClientStream {
	t.Helper()
	s, err := conn.NewStream(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+consumer),
		&grpc.StreamDesc{ServerStreams: true}, workerv1connect.WorkerServiceSubscribeProcedure)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(&workerv1.SubscribeRequest{WorkerId: "w", MaxInFlight: 1,
		Subscriptions: []*workerv1.Subscription{{Definition: "add_company_to_crm"}}}); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseSend()
	return s
}

// relais serve speaks cleartext HTTP/2 to gRPC workers on the listener of
// the REST API, and a stopping serve ends their streams cleanly.
func TestServeSpeaksGRPCOverH2CAndEndsStreamsOnShutdown(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap, "RELAIS_DATA_KEYS": testDataKeys})
	if _, stderr, err := applyRun(t, r.base, "-f", "../../examples/definitions"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	consumer := crmConsumer(t, r.base)
	conn := grpcConn(t, r.base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	health, err := healthv1.NewHealthClient(conn).Check(ctx, &healthv1.HealthCheckRequest{Service: workerv1connect.WorkerServiceName})
	if err != nil || health.GetStatus() != healthv1.HealthCheckResponse_SERVING {
		t.Fatalf("health over h2c = %v, %v", health, err)
	}
	s := subscribeCRM(t, ctx, conn, consumer)
	var first workerv1.WorkerEvent
	if err := s.RecvMsg(&first); err != nil || first.GetHeartbeat() == nil {
		t.Fatalf("first event %v, %v", &first, err)
	}
	ended := make(chan error, 1)
	go func() {
		for {
			var ev workerv1.WorkerEvent
			if err := s.RecvMsg(&ev); err != nil {
				ended <- err
				return
			}
		}
	}()
	stopAt := time.Now()
	r.stop(t)
	select {
	case err := <-ended:
		if st, _ := status.FromError(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "shutting down") {
			t.Errorf("the stream ended with %v, want UNAVAILABLE (replica stopping)", err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Error("the stream outlived the shutdown")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end with the server")
	}
	if d := time.Since(stopAt); d > 5*time.Second {
		t.Errorf("shutdown with a stream took %v", d)
	}
}

// While serve drains after its signal, its background work still runs: a
// worker stream settling what it holds hears at once (NOTIFY) that an
// operator stopped an instance, rather than at its next keep-alive (10 s);
// the push runner and the timers stop only with the replica, after the
// drain (a claim interrupted by the signal left its push call never made
// and its instance failed outcome_unknown).
func TestDrainingServeStillHearsCancellations(t *testing.T) {
	t.Parallel()
	r := startServe(t, map[string]string{"RELAIS_DATABASE_URL": dbtest.URL(t), "RELAIS_BOOTSTRAP_TOKEN": bootstrap, "RELAIS_DATA_KEYS": testDataKeys,
		"RELAIS_SHUTDOWN_TIMEOUT": "PT20S"})
	if _, stderr, err := applyRun(t, r.base, "-f", "../../examples"); err != nil {
		t.Fatalf("apply: %v\n%s", err, stderr)
	}
	consumer := crmConsumer(t, r.base)
	conn := grpcConn(t, r.base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := subscribeCRM(t, ctx, conn, consumer)
	events := make(chan *workerv1.WorkerEvent, 16)
	go func() {
		defer close(events)
		for {
			ev := &workerv1.WorkerEvent{}
			if err := s.RecvMsg(ev); err != nil {
				return
			}
			events <- ev
		}
	}()
	next := func(what string, want func(*workerv1.WorkerEvent) bool, within time.Duration) *workerv1.WorkerEvent {
		t.Helper()
		timeout := time.After(within)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the stream ended before %s", what)
				}
				if want(ev) {
					return ev
				}
			case <-timeout:
				t.Fatalf("no %s within %v", what, within)
			}
		}
	}
	inst := must(t, 201, callH(t, "POST", r.base+"/api/v1/processes/onboard_company/instances", bootstrap, map[string]any{"inputs": map[string]any{
		"company": map[string]any{"name": "Acme", "country": "FR", "contact": map[string]any{"email": "a@acme.example"}}}}))["id"].(string)
	a := next("assignment", func(ev *workerv1.WorkerEvent) bool { return ev.GetAssignment() != nil }, 10*time.Second).GetAssignment()

	stopped := make(chan struct{})
	go func() { defer close(stopped); r.stop(t) }()
	next("draining heartbeat", func(ev *workerv1.WorkerEvent) bool { return ev.GetHeartbeat().GetDraining() }, 10*time.Second)
	// The drain closed the idle connections: a new one serves the stop.
	http.DefaultClient.CloseIdleConnections()
	stopAt := time.Now()
	must(t, 200, callH(t, "POST", r.base+"/api/v1/instances/"+inst+"/stop", bootstrap, map[string]any{"reason": "stopped during a drain"}))
	c := next("cancellation", func(ev *workerv1.WorkerEvent) bool { return ev.GetCancellation() != nil }, 8*time.Second).GetCancellation()
	if c.GetOccurrenceId() != a.GetOccurrenceId() {
		t.Errorf("cancellation of %s, want %s", c.GetOccurrenceId(), a.GetOccurrenceId())
	}
	if d := time.Since(stopAt); d > 2*time.Second {
		t.Errorf("the cancellation reached the draining replica's stream %v after the stop, want at once (NOTIFY)", d)
	}
	<-stopped
}
