package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	healthv1 "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/relaistest"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
)

// The worker catalog lists live streams and pollers, per definition too,
// with what each holds; connects and disconnects are logged and counted.
func TestWorkerCatalog(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	list := func(path string) []map[string]any {
		var out []map[string]any
		for _, it := range f.env.Must(200, "GET", path, f.env.Operator, nil).JSON(t)["items"].([]any) {
			out = append(out, it.(map[string]any))
		}
		return out
	}
	if got := list("/api/v1/workers"); len(got) != 0 {
		t.Fatalf("workers before any connected: %v", got)
	}
	s := open(t, newClient(t, "grpc", f.env.URL), f.consumer, &workerv1.SubscribeRequest{WorkerId: "crm-sync-7", MaxInFlight: 4,
		Subscriptions: []*workerv1.Subscription{{Definition: "add_company_to_crm", Fields: []string{"/company_name"}}}})
	start(t, f.env, "Acme")
	s.assignment(5 * time.Second)

	got := list("/api/v1/definitions/add_company_to_crm/workers")
	if len(got) != 1 {
		t.Fatalf("workers of add_company_to_crm = %v, want the stream", got)
	}
	w := got[0]
	if w["worker_id"] != "crm-sync-7" || w["protocol"] != "stream" || w["in_flight"] != 1.0 ||
		w["consumer"].(map[string]any)["name"] != "crm-sync" || w["replica"] == "" || w["connected_at"] == nil || w["last_seen_at"] == nil {
		t.Errorf("stream in the catalog = %v", w)
	}
	subs, _ := json.Marshal(w["subscriptions"])
	if string(subs) != `[{"definition":"add_company_to_crm","fields":["/company_name"]}]` {
		t.Errorf("subscriptions %s", subs)
	}
	if v, _ := connectedGauge(t, f.env, "add_company_to_crm"); v != 1 {
		t.Errorf("relais_workers_connected{definition=add_company_to_crm} = %v, want 1", v)
	}

	// A poller appears by its fetch.
	f.env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.consumer, map[string]any{"worker_id": "poller-1",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}})
	// Streams on the other wire protocols, told apart by their transport.
	var others []*subscription
	for _, kind := range []string{"grpcweb", "connect"} {
		others = append(others, open(t, newClient(t, kind, f.env.URL), f.consumer, &workerv1.SubscribeRequest{WorkerId: "crm-" + kind, MaxInFlight: 1,
			Subscriptions: []*workerv1.Subscription{{Definition: "add_company_to_crm"}}}))
	}
	protocols := map[string]string{}
	for _, w := range list("/api/v1/workers") {
		protocols[w["worker_id"].(string)] = fmt.Sprint(w["protocol"], " ", w["transport"])
	}
	if want := map[string]string{"crm-sync-7": "stream grpc", "crm-grpcweb": "stream grpcweb", "crm-connect": "stream connect", "poller-1": "long_poll <nil>"}; !maps.Equal(protocols, want) {
		t.Errorf("workers (protocol transport) = %v, want %v", protocols, want)
	}
	f.env.Definition("charge_card.yaml")
	if got := list("/api/v1/definitions/charge_card/workers"); len(got) != 0 {
		t.Errorf("workers of charge_card = %v, want none", got)
	}
	f.env.Must(404, "GET", "/api/v1/definitions/no_such_thing/workers", f.env.Operator, nil)
	f.env.Must(403, "GET", "/api/v1/workers", f.env.Designer, nil)
	f.env.Must(403, "GET", "/api/v1/workers", f.consumer, nil)

	s.close()
	for _, o := range others {
		o.close()
	}
	relaistest.WaitFor(t, 5*time.Second, "the streams leave the catalog", func() (bool, string) {
		var ids []string
		for _, w := range list("/api/v1/workers") {
			ids = append(ids, w["worker_id"].(string))
		}
		return slices.Equal(ids, []string{"poller-1"}), strings.Join(ids, ",")
	})
	for _, want := range []string{"event=worker.connected protocol=stream", "transport=grpcweb", "event=worker.disconnected protocol=stream", "event=worker.connected protocol=long_poll"} {
		relaistest.WaitFor(t, 5*time.Second, "the log event "+want, func() (bool, string) {
			return strings.Contains(f.env.Logs.String(), want), "not logged"
		})
	}
	if v, ok := connectedGauge(t, f.env, "add_company_to_crm"); v != 0 || !ok {
		t.Errorf("relais_workers_connected after the stream ended = %v (present %v), want 0, present (not vanished)", v, ok)
	}
}

// A stream whose catalog row was pruned while its replica could not
// refresh it (a database outage longer than the row lives: another
// replica logged it disconnected) is logged connected again when its next
// heartbeat writes the row back.
func TestAStreamBackInTheCatalogIsLoggedConnected(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, func(c *config.Config) { c.Stream.Heartbeat = time.Second })
	open(t, newClient(t, "grpc", f.env.URL), f.consumer, subscribeRequest("crm-sync-8", 1))
	relaistest.WaitFor(t, 5*time.Second, "the stream in the catalog", func() (bool, string) {
		return len(f.env.Must(200, "GET", "/api/v1/workers", f.env.Operator, nil).JSON(t)["items"].([]any)) == 1, ""
	})
	// What a pruning replica does to a row its replica did not refresh.
	if _, err := f.env.Pool.Exec(context.Background(), "delete from workers where worker_id = 'crm-sync-8'"); err != nil {
		t.Fatal(err)
	}
	relaistest.WaitFor(t, 5*time.Second, "the stream logged connected again", func() (bool, string) {
		return strings.Contains(f.env.Logs.String(), `event=worker.connected protocol=stream`) &&
			strings.Contains(f.env.Logs.String(), `reason="back in the catalog after its row lapsed"`), "not logged"
	})
	if got := f.env.Must(200, "GET", "/api/v1/workers", f.env.Operator, nil).JSON(t)["items"].([]any); len(got) != 1 {
		t.Errorf("workers after the row came back: %v, want the stream", got)
	}
}

// A poller that stops fetching leaves the catalog after its wait plus
// three heartbeats, logged worker.disconnected.
func TestPollersLeaveTheCatalogWhenTheyStop(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	f.env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.consumer, map[string]any{"worker_id": "poller-1",
		"subscriptions": []any{map[string]any{"definition": "add_company_to_crm"}}})
	f.env.Clock.Advance(time.Hour)
	relaistest.WaitFor(t, 5*time.Second, "the poller is pruned", func() (bool, string) {
		items := f.env.Must(200, "GET", "/api/v1/workers", f.env.Operator, nil).JSON(t)["items"].([]any)
		return len(items) == 0 && strings.Contains(f.env.Logs.String(), "event=worker.disconnected protocol=long_poll"), ""
	})
}

// connectedGauge reads relais_workers_connected{definition} of env's
// replica, and whether the series is there.
func connectedGauge(t *testing.T, env *relaistest.Env, definition string) (float64, bool) {
	t.Helper()
	families, err := env.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "relais_workers_connected" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "definition" && l.GetValue() == definition {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// Declared fields: the stream receives only those inputs.
func TestDeclaredFieldsOnAStream(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	s := open(t, newClient(t, "connect", f.env.URL), f.consumer, &workerv1.SubscribeRequest{WorkerId: "w", MaxInFlight: 1,
		Subscriptions: []*workerv1.Subscription{{Definition: "add_company_to_crm", Fields: []string{"/company_name"}}}})
	start(t, f.env, "Acme")
	if got := string(s.assignment(5 * time.Second).GetInputs()); got != `{"company_name":"Acme"}` {
		t.Errorf("inputs %s, want only company_name", got)
	}
}

// A pattern subscription picks up a key created after it subscribed, from
// the first notification of it.
func TestPatternPicksUpKeysCreatedLater(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	res := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm", "grants": []any{map[string]any{"definition": "crm.*"}}})
	consumer := res.JSON(t)["token"].(string)
	s := open(t, newClient(t, "grpc", env.URL), consumer, &workerv1.SubscribeRequest{WorkerId: "w", MaxInFlight: 1,
		Subscriptions: []*workerv1.Subscription{{Definition: "crm.*"}}})

	doc := relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0]
	env.Must(201, "PUT", "/api/v1/definitions/crm.add_company/working", env.Designer, relaistest.Body(doc, "key"))
	env.Must(201, "POST", "/api/v1/definitions/crm.add_company/revisions", env.Designer, nil)
	proc := relaistest.CRMProcess(nil)
	proc["nodes"].(map[string]any)["crm"].(map[string]any)["definition"] = "crm.add_company"
	env.Process("crm_only", proc)
	start(t, env, "Acme")
	if a := s.assignment(5 * time.Second); a.GetDefinition() != "crm.add_company" {
		t.Errorf("assignment of %s", a.GetDefinition())
	}
}

// A grant narrowed under a pattern subscription takes away what the stream
// holds of what is no longer granted: handed back without spending an
// attempt, the worker told, while the stream lives on for the rest. It
// kept the task locked (its keep-alives) for as long as the stream lived,
// though its worker could settle none of it.
func TestNarrowedPatternGrantHandsBackWhatItNoLongerCovers(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	res := env.Must(201, "POST", "/api/v1/consumers", env.Admin, map[string]any{"name": "crm", "grants": []any{map[string]any{"definition": "crm.*"}}})
	consumer, consumerID := res.JSON(t)["token"].(string), res.JSON(t)["id"]
	doc := relaistest.ExampleDocs(t, "definitions/add_company_to_crm.yaml")[0]
	for _, key := range []string{"crm.add_company", "crm.other"} {
		env.Must(201, "PUT", "/api/v1/definitions/"+key+"/working", env.Designer, relaistest.Body(doc, "key"))
		env.Must(201, "POST", "/api/v1/definitions/"+key+"/revisions", env.Designer, nil)
	}
	proc := relaistest.CRMProcess(nil)
	proc["nodes"].(map[string]any)["crm"].(map[string]any)["definition"] = "crm.add_company"
	env.Process("crm_only", proc)
	s := open(t, newClient(t, "grpc", env.URL), consumer, &workerv1.SubscribeRequest{WorkerId: "w", MaxInFlight: 2,
		Subscriptions: []*workerv1.Subscription{{Definition: "crm.*"}}})
	start(t, env, "Acme")
	held := s.assignment(5 * time.Second)
	env.Must(200, "PUT", fmt.Sprintf("/api/v1/consumers/%v/grants", consumerID), env.Admin, map[string]any{"grants": []any{map[string]any{"definition": "crm.other", "revisions": "all"}}})
	var cancelled *workerv1.Cancellation
	for cancelled == nil {
		cancelled = s.next(5 * time.Second).GetCancellation()
	}
	if cancelled.GetOccurrenceId() != held.GetOccurrenceId() {
		t.Errorf("cancellation of %s, want the held %s", cancelled.GetOccurrenceId(), held.GetOccurrenceId())
	}
	if got := outcomes(t, env, held.GetOccurrenceId()); !slices.Equal(got, []string{"released"}) {
		t.Errorf("the held occurrence's attempts %q, want [released] (handed back, no attempt spent)", got)
	}
	if st := env.Must(200, "GET", "/api/v1/occurrences/"+held.GetOccurrenceId(), env.Operator, nil).JSON(t)["status"]; st != "available" {
		t.Errorf("the handed back occurrence is %v, want available", st)
	}
	s.quiet(time.Second) // the stream lives on, for crm.other
}

// gRPC health and server reflection are served, so generic tools work.
func TestHealthAndReflection(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := newClient(t, "grpc", f.env.URL)
	for _, service := range []string{"", "relais.worker.v1.WorkerService"} {
		res, err := healthv1.NewHealthClient(c.conn).Check(context.Background(), &healthv1.HealthCheckRequest{Service: service})
		if err != nil || res.GetStatus() != healthv1.HealthCheckResponse_SERVING {
			t.Errorf("health of %q = %v, %v; want SERVING", service, res, err)
		}
	}
	_, err := healthv1.NewHealthClient(c.conn).Check(context.Background(), &healthv1.HealthCheckRequest{Service: "nope"})
	wantRefusal(t, "health of an unknown service", err, "not_found", "")

	rs, err := reflectionv1.NewServerReflectionClient(c.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = rs.CloseSend()
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, "relais.worker.v1.WorkerService") || !slices.Contains(names, "grpc.health.v1.Health") {
		t.Errorf("reflection lists %v", names)
	}
	if _, err := rs.Recv(); err != io.EOF {
		t.Logf("after CloseSend: %v", err)
	}

	// A watch (gRPC's client-side health checking) hears the drain and
	// ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watch, err := healthv1.NewHealthClient(c.conn).Watch(ctx, &healthv1.HealthCheckRequest{Service: "relais.worker.v1.WorkerService"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := watch.Recv(); err != nil || res.GetStatus() != healthv1.HealthCheckResponse_SERVING {
		t.Fatalf("watch = %v, %v; want SERVING", res, err)
	}
	f.env.Drain()
	if res, err := watch.Recv(); err != nil || res.GetStatus() != healthv1.HealthCheckResponse_NOT_SERVING {
		t.Errorf("watch during the drain = %v, %v; want NOT_SERVING", res, err)
	}
	if res, err := watch.Recv(); err != io.EOF {
		t.Errorf("watch after the drain's status = %v, %v; want its end", res, err)
	}
	res2, err := healthv1.NewHealthClient(c.conn).Check(context.Background(), &healthv1.HealthCheckRequest{})
	if err != nil || res2.GetStatus() != healthv1.HealthCheckResponse_NOT_SERVING {
		t.Errorf("health of a stopping replica = %v, %v; want NOT_SERVING", res2, err)
	}
}
