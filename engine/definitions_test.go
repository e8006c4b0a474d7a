package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/testlog"
)

// Numbers may be written in any JSON notation; the Working is kept as the
// exact canonical bytes that were digested, so snapshotting it twice gives
// one revision whose digest is the Working's.
func TestSnapshotOfNumbersInAnyNotationGivesOneRevision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	working := `{"name":"Score",
	 "inputs":{"fields":[{"name":"amount","type":"number","required":true,"minimum":-0,"maximum":1e2},
	                     {"name":"rate","type":"number","minimum":1.50E-1,"maximum":2.5e+1}]},
	 "outputs":{"fields":[{"name":"ok","type":"boolean","required":true}]}}`
	d, _, err := e.SaveWorking(ctx, "score", []byte(working))
	if err != nil {
		t.Fatal(err)
	}
	first, created, err := e.Snapshot(ctx, "score")
	if err != nil || !created {
		t.Fatalf("first snapshot: created %v, %v", created, err)
	}
	second, created, err := e.Snapshot(ctx, "score")
	if err != nil {
		t.Fatal(err)
	}
	if created || second.Revision != first.Revision {
		t.Errorf("second snapshot of an unchanged Working made revision %d (created %v), want revision %d again", second.Revision, created, first.Revision)
	}
	got, err := e.GetDefinition(ctx, "score")
	if err != nil {
		t.Fatal(err)
	}
	if got.WorkingDigest != d.WorkingDigest || got.WorkingDigest != first.Digest || got.Working.Digest() != first.Digest {
		t.Errorf("digests: saved %s, read back %s (recomputed %s), revision %s; want one", d.WorkingDigest, got.WorkingDigest, got.Working.Digest(), first.Digest)
	}
}

// A Working saved while it was kept as jsonb has its numbers rewritten
// (1e2 stored as 100) under the digest of what was sent: digests are taken
// from the stored bytes, so it still snapshots once.
func TestSnapshotOfAWorkingRewrittenByJSONB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	working := `{"name":"Score","inputs":{"fields":[{"name":"amount","type":"number","required":true,"maximum":1e2}]},
	 "outputs":{"fields":[{"name":"ok","type":"boolean","required":true}]}}`
	if _, _, err := e.SaveWorking(ctx, "score", []byte(working)); err != nil {
		t.Fatal(err)
	}
	// What migration 0006 left of a Working saved before it.
	if _, err := e.pool.Exec(ctx, "update definitions set working = working::jsonb::json where key = 'score'"); err != nil {
		t.Fatal(err)
	}
	first, _, err := e.Snapshot(ctx, "score")
	if err != nil {
		t.Fatal(err)
	}
	second, created, err := e.Snapshot(ctx, "score")
	if err != nil || created || second.Revision != first.Revision {
		t.Errorf("second snapshot: revision %d created %v (%v), want revision %d again", second.Revision, created, err, first.Revision)
	}
	if d, err := e.GetDefinition(ctx, "score"); err != nil || d.WorkingDigest != first.Digest {
		t.Errorf("working digest %s (%v), want the revision's %s: nothing is left to snapshot", d.WorkingDigest, err, first.Digest)
	}
}

// TestLoweredProtectionIsLoggedAtWarn: a revision or a process version
// that lowers a classification shows and stores in clear, from then on,
// values masked and sealed until then. It is allowed (a designer's call),
// and logged at WARN with who did it and each field, for a security team
// to alert on; raising one, or a first revision, logs nothing.
func TestLoweredProtectionIsLoggedAtWarn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs testlog.Buffer
	e := New(dbtest.Pool(t), Options{Keys: testRing(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	working := func(class string) string {
		return `{"name":"KYC","inputs":{"fields":[{"name":"ssn","type":"text","required":true` + class + `},{"name":"tier","type":"text"}]},
		 "outputs":{"fields":[{"name":"ok","type":"boolean","required":true}]}}`
	}
	snapshot := func(class string) string {
		t.Helper()
		before := len(logs.String())
		if _, _, err := e.SaveWorking(ctx, "kyc", []byte(working(class))); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.Snapshot(ctx, "kyc"); err != nil {
			t.Fatal(err)
		}
		return logs.String()[before:]
	}
	if got := snapshot(`,"classification":"secret"`); strings.Contains(got, "protection lowered") {
		t.Errorf("first revision logged %q", got)
	}
	got := snapshot("")
	if !strings.Contains(got, `level=WARN msg="protection lowered" event=definition.protection_lowered actor=system`) ||
		!strings.Contains(got, `definition=kyc revision=2 fields="[/inputs/ssn (classification secret → normal)]"`) {
		t.Errorf("revision 2 lowering /inputs/ssn logged\n%s", got)
	}
	if got := snapshot(`,"classification":"sensitive"`); strings.Contains(got, "protection lowered") {
		t.Errorf("a raised classification logged %q", got)
	}

	publish := func(class string) string {
		t.Helper()
		before := len(logs.String())
		doc := `{"inputs":{"fields":[{"name":"ssn","type":"text","required":true` + class + `}]},"start":"kyc","nodes":{
		 "kyc":{"kind":"pull","definition":"kyc","revision":1,"inputs":{"ssn":{"from":"input.ssn"}},"next":"done"},"done":{"kind":"end"}}}`
		if _, _, err := e.PublishProcess(ctx, "onboard", []byte(doc)); err != nil {
			t.Fatal(err)
		}
		return logs.String()[before:]
	}
	if got := publish(`,"classification":"secret"`); strings.Contains(got, "protection lowered") {
		t.Errorf("first version logged %q", got)
	}
	// Revision 1's ssn is secret: a normal process input may not feed it
	// (classification never decreases along a binding), so version 2
	// pins revision 3, whose ssn is sensitive, from a sensitive input.
	doc := `{"inputs":{"fields":[{"name":"ssn","type":"text","required":true,"classification":"sensitive"}]},"start":"kyc","nodes":{
	 "kyc":{"kind":"pull","definition":"kyc","revision":3,"inputs":{"ssn":{"from":"input.ssn"}},"next":"done"},"done":{"kind":"end"}}}`
	before := len(logs.String())
	if _, _, err := e.PublishProcess(ctx, "onboard", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	// Named as a process's, for an alert to tell it from a definition's
	// (designer QA).
	if got := logs.String()[before:]; !strings.Contains(got, `event=process.protection_lowered`) ||
		!strings.Contains(got, `process=onboard version=2 fields="[/inputs/ssn (classification secret → sensitive)]"`) {
		t.Errorf("version 2 lowering /inputs/ssn logged\n%s", got)
	}
}

// TestLoweredProtectionWithALostAnswerIsLoggedAsPossible: a change whose
// COMMIT's answer was lost may have landed, and an apply run again would
// find it unchanged and say nothing: the WARN says it may have happened.
// Another failure (a refusal) logs nothing.
func TestLoweredProtectionWithALostAnswerIsLoggedAsPossible(t *testing.T) {
	t.Parallel()
	var logs testlog.Buffer
	e := New(dbtest.Pool(t), Options{Keys: testRing(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	fields := []string{"/inputs/ssn (classification secret → normal)"}
	e.logProtectionLowered(context.Background(), fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), EventProtectionLowered, fields, "definition", "kyc", "revision", int32(2))
	if got := logs.String(); !strings.Contains(got, `level=WARN msg="protection may have been lowered: the database's answer was lost" event=definition.protection_lowered`) ||
		!strings.Contains(got, `definition=kyc revision=2 fields="[/inputs/ssn (classification secret → normal)]" outcome=unknown`) {
		t.Errorf("log %q", got)
	}
	before := len(logs.String())
	e.logProtectionLowered(context.Background(), errors.New("refused"), EventProtectionLowered, fields, "definition", "kyc", "revision", int32(2))
	if got := logs.String()[before:]; got != "" {
		t.Errorf("a refused change logged %q", got)
	}
}
