package engine

import (
	"context"
	"testing"
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
