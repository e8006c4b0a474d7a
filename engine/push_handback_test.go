package engine

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relais/relais/queries"
)

// A push claim whose calls the database's absence kept from being
// prepared (it went away after the claim's COMMIT) returns them as
// unprepared, no request made, and HandBackPush gives their attempt back
// (ended released): claimed again, the call is made, instead of being left
// reserved for the timers to fail as outcome_unknown.
func TestUnpreparedPushIsHandedBack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	define(t, e, "crm", crmWorking)
	if _, _, err := e.PutDestination(ctx, DestinationSpec{Name: "crm-api", URL: "http://127.0.0.1:9/", MaxTimeout: 5 * time.Second}, false); err != nil {
		t.Fatal(err)
	}
	doc := `{"inputs":{"fields":[{"name":"name","type":"text","required":true}]},"start":"push","nodes":{
	 "push":{"kind":"push","definition":"crm","revision":1,"destination":"crm-api","inputs":{"company_name":{"from":"input.name"}},
	         "routes":{"created":"done","existing":"done"}},
	 "done":{"kind":"end"}}}`
	if _, _, err := e.PublishProcess(ctx, "pushing", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.StartInstance(ctx, StartRequest{ProcessKey: "pushing", Inputs: json.RawMessage(`{"name":"Acme"}`)}); err != nil {
		t.Fatal(err)
	}
	// The claim reaches the database; the reads that prepare its call
	// find it gone (a port nothing listens on).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "postgres://nobody@" + l.Addr().String() + "/relais?sslmode=disable&connect_timeout=2"
	l.Close()
	dead, err := pgxpool.New(ctx, gone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	live := e.q
	e.q = queries.New(dead)
	calls, unprepared, err := e.ClaimPush(ctx, "replica-1", 1)
	e.q = live
	if err != nil || len(calls) != 0 || len(unprepared) != 1 || unprepared[0].Attempt != 1 {
		t.Fatalf("claim with the database gone after it: calls %v, unprepared %v, %v; want one unprepared, attempt 1", calls, unprepared, err)
	}
	if err := e.HandBackPush(ctx, unprepared[0]); err != nil {
		t.Fatal(err)
	}
	calls, unprepared, err = e.ClaimPush(ctx, "replica-1", 1)
	if err != nil || len(unprepared) != 0 || len(calls) != 1 || calls[0].Attempt != 2 {
		t.Fatalf("claimed again: calls %v, unprepared %v, %v; want the call as attempt 2", len(calls), unprepared, err)
	}
	var outcome string
	if err := e.pool.QueryRow(ctx, `select outcome from attempts where occurrence_id = $1 and number = 1`, calls[0].ID).Scan(&outcome); err != nil || outcome != OutcomeReleased {
		t.Errorf("the unprepared attempt ended %q (%v), want released: given back, no call made", outcome, err)
	}
}
