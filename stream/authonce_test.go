package stream_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/relaistest"
	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
	"github.com/relais/relais/proto/relais/worker/v1/workerv1connect"
)

// lookups counts the statements named name that a pool runs.
type lookups struct {
	name string
	n    atomic.Int64
}

func (l *lookups) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, "-- name: "+l.name+" ") {
		l.n.Add(1)
	}
	return ctx
}

func (l *lookups) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A call's token is authenticated once: the check made before its body is
// read hands its answer to the handler, which authenticated it again (a
// settle token's lookup is a query per call).
func TestACallsTokenIsAuthenticatedOnce(t *testing.T) {
	t.Parallel()
	cfg := dbtest.Pool(t).Config()
	traced := &lookups{name: "SettleTokenGet"}
	cfg.ConnConfig.Tracer = traced
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	env := relaistest.NewOnPool(t, pool)
	env.Definition("add_company_to_crm.yaml")
	env.Process("crm_only", relaistest.CRMProcess(nil))
	consumer := env.Consumer("crm-sync", "add_company_to_crm")
	start(t, env, "Acme")
	c := newClient(t, "connect", env.URL)
	s := open(t, c, consumer, subscribeRequest("w", 1))
	a := s.assignment(5 * time.Second)
	if _, err := call[workerv1.DeferRequest, workerv1.DeferResponse](context.Background(), c, consumer, workerv1connect.WorkerServiceDeferProcedure,
		&workerv1.DeferRequest{OccurrenceId: a.GetOccurrenceId(), WorkerId: "w"}); err != nil {
		t.Fatal(err)
	}
	st := env.Must(201, "POST", "/api/v1/pull/occurrences/"+a.GetOccurrenceId()+"/settle-token", consumer, map[string]any{"worker_id": "w"}).JSON(t)["token"].(string)
	before := traced.n.Load()
	if _, err := complete(c, st, "", a.GetOccurrenceId(), outputs("created", "C-1")); err != nil {
		t.Fatal(err)
	}
	if n := traced.n.Load() - before; n != 1 {
		t.Errorf("a completion with a settle token looked it up %d times, want once", n)
	}
}
