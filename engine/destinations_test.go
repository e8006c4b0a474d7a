package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relais/relais/internal/fault"
)

// TestPublishRacingDestinationDeleteStaysConsistent races, for many
// destinations at once, the publication of a version that pushes to the
// destination against the destination's deletion. Exactly one may win
// each race: the version is published and the deletion refused with
// destination_in_use, or the destination is deleted and the publication
// refused with invalid_process. Afterwards every destination a published
// version names exists.
func TestPublishRacingDestinationDeleteStaysConsistent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	if _, _, err := e.SaveWorking(ctx, "ping", []byte(`{"name":"Ping","inputs":{"fields":[]},"outputs":{"fields":[]}}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Snapshot(ctx, "ping"); err != nil {
		t.Fatal(err)
	}
	const races = 40
	for i := range races {
		if _, _, err := e.PutDestination(ctx, DestinationSpec{Name: fmt.Sprintf("dest-%d", i), URL: "http://127.0.0.1:9/", MaxTimeout: 5 * time.Second}, false); err != nil {
			t.Fatal(err)
		}
	}
	type outcome struct{ publish, remove error }
	outcomes := make([]outcome, races)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range races {
		doc := fmt.Sprintf(`{"inputs":{"fields":[]},"start":"call","nodes":{
		  "call":{"kind":"push","definition":"ping","revision":1,"destination":"dest-%d","next":"done"},
		  "done":{"kind":"end"}}}`, i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, _, outcomes[i].publish = e.PublishProcess(ctx, fmt.Sprintf("race_%d", i), []byte(doc))
		}()
		// Publishing reads more than deleting does, so deletions would
		// win nearly every race; a spread of start times lets both kinds
		// of winner happen, and the races in between.
		lag := time.Duration(i%10) * 5 * time.Millisecond
		go func() {
			defer wg.Done()
			<-start
			time.Sleep(lag)
			outcomes[i].remove = e.DeleteDestination(ctx, fmt.Sprintf("dest-%d", i))
		}()
	}
	close(start)
	wg.Wait()

	published, deleted := 0, 0
	for i, o := range outcomes {
		switch {
		case o.publish == nil && fault.HasCode(o.remove, "destination_in_use"):
			published++
		case o.remove == nil && fault.HasCode(o.publish, "invalid_process"):
			deleted++
		default:
			t.Errorf("race %d: publish %v, delete %v; want exactly one to win", i, o.publish, o.remove)
		}
	}
	t.Logf("%d publications won, %d deletions won", published, deleted)

	rows, err := e.pool.Query(ctx, `
		select v.process_key, v.version, n.value ->> 'destination'
		from process_versions v, json_each(v.document -> 'nodes') n
		where n.value ->> 'kind' = 'push'
		  and not exists (select 1 from destinations d where d.name = n.value ->> 'destination')`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, dest string
		var version int
		if err := rows.Scan(&key, &version, &dest); err != nil {
			t.Fatal(err)
		}
		t.Errorf("published version %s@%d pushes to deleted destination %q", key, version, dest)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentPutsOfOneDestinationReportWhatEachDid: a put reads,
// compares and writes under the name's lock, so of many identical puts
// racing to create a destination exactly one reports created and the
// others unchanged (without the lock, the losers rewrote it and said
// updated); a put changing a header value then reports updated, and a dry
// run of the same reports unchanged without writing.
func TestConcurrentPutsOfOneDestinationReportWhatEachDid(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	spec := DestinationSpec{Name: "crm", URL: "https://crm.example/api?key=k-123456", Headers: map[string]string{"authorization": "Bearer s3cret"},
		MaxTimeout: 5 * time.Second}
	const racers = 20
	changes := make([]Change, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			_, c, err := e.PutDestination(ctx, spec, false)
			if err != nil {
				t.Error(err)
			}
			changes[i] = c
		})
	}
	close(start)
	wg.Wait()
	count := map[Change]int{}
	for _, c := range changes {
		count[c]++
	}
	if count[Created] != 1 || count[Unchanged] != racers-1 {
		t.Fatalf("changes %v: want one created and %d unchanged", count, racers-1)
	}

	changed := spec
	changed.Headers = map[string]string{"Authorization": "Bearer rotated"}
	if d, c, err := e.PutDestination(ctx, changed, true); err != nil || c != Updated || d.UpdatedAt.IsZero() {
		t.Fatalf("dry run of a new header value: %v %v %+v, want updated (the stored destination shown)", c, err, d)
	}
	// A dry run shows what the put would store: here the header dropped
	// and the URL changed, not the destination as it is.
	dropped := spec
	dropped.Headers, dropped.URL = nil, "https://crm.example/other"
	if d, c, err := e.PutDestination(ctx, dropped, true); err != nil || c != Updated || len(d.HeaderNames) != 0 || d.URL != dropped.URL || d.CreatedAt.IsZero() {
		t.Fatalf("dry run dropping the header: %v %v %+v, want updated, shown without the header, at the new URL", c, err, d)
	}
	if _, c, _ := e.PutDestination(ctx, spec, false); c != Unchanged {
		t.Fatalf("after the dry run: %v, want unchanged (a dry run writes nothing)", c)
	}
	d, c, err := e.PutDestination(ctx, changed, false)
	if err != nil || c != Updated {
		t.Fatalf("a new header value: %v %v, want updated", c, err)
	}
	if strings.Contains(d.URL, "k-123456") {
		t.Errorf("the query is shown in clear: %q", d.URL)
	}
	target, err := e.destinationCall(ctx, e.q, "crm")
	if err != nil || target.Headers["Authorization"] != "Bearer rotated" || target.URL != spec.URL {
		t.Errorf("stored target %+v (%v): want the new header and the query in clear", target, err)
	}
}

// What a push call would not send as configured is refused, never stored
// to be dropped without a word: a header Relais sets itself, a second
// spelling of one name, a port no call can use.
func TestDestinationRefusesWhatACallWouldNotSend(t *testing.T) {
	t.Parallel()
	spec := DestinationSpec{Name: "hook", URL: "https://hooks.example/in", MaxTimeout: time.Second,
		Headers: map[string]string{"x-a": "lower", "X-A": "upper", "Accept": "text/csv", "User-Agent": "mine", "Content-Type": "text/plain", "X-Fine": "ok",
			// Set, it turns the transport's decompression off: gzip
			// answers read as bytes (push QA).
			"Accept-Encoding": "gzip", "Content-Encoding": "gzip"}}
	_, err := spec.validate()
	fe, ok := fault.As(err)
	if !ok || fe.Code != "invalid_destination" {
		t.Fatalf("validate = %v, want invalid_destination", err)
	}
	got := map[string]string{}
	for _, e := range fe.Errors {
		got[e.Path] = e.Message
	}
	for _, path := range []string{"/headers/Accept", "/headers/User-Agent", "/headers/Content-Type", "/headers/x-a", "/headers/Accept-Encoding", "/headers/Content-Encoding"} {
		if got[path] == "" {
			t.Errorf("no refusal at %s in %v", path, fe.Errors)
		}
	}
	if len(fe.Errors) != 6 {
		t.Errorf("refusals %v, want exactly those six", fe.Errors)
	}
	// A value net/http would refuse to send (every call failing
	// connection_failed) names the character, never the value.
	spec.Headers = map[string]string{"Authorization": "Bearer ok\x01SECRET", "X-Tab": "a\tb", "X-Del": "a\x7f", "X-Nl": "a\nb", "X-Utf8": "café"}
	_, err = spec.validate()
	fe, _ = fault.As(err)
	got = map[string]string{}
	for _, e := range fe.Errors {
		got[e.Path] = e.Message
	}
	if len(got) != 3 || !strings.Contains(got["/headers/Authorization"], "U+0001") || got["/headers/X-Del"] == "" || got["/headers/X-Nl"] == "" || strings.Contains(fmt.Sprint(fe), "SECRET") {
		t.Errorf("header values with control characters: %v, want /headers/Authorization (U+0001), X-Del and X-Nl refused, no value named", fe)
	}
	for url, ok := range map[string]bool{"http://[::1]:99999/": false, "http://hooks.example:0/": false, "http://hooks.example:8080/in": true} {
		spec := DestinationSpec{Name: "hook", URL: url, MaxTimeout: time.Second}
		if _, err := spec.validate(); (err == nil) != ok {
			t.Errorf("%s: %v, want accepted %v", url, err, ok)
		}
	}
}

// TestMaskQuery: every value is masked, a bare parameter too (it may be
// a token), but an empty value stays empty (security QA: `flag=` shown
// as `flag=***` claimed a secret that is not there).
func TestMaskQuery(t *testing.T) {
	for query, want := range map[string]string{
		"api_key=s3cr3t&region=eu": "api_key=***&region=***",
		"flag=&k=v":                "flag=&k=***",
		"tok3n":                    "***",
		"a=1&&b=":                  "a=***&&b=",
	} {
		if got := maskQuery(query); got != want {
			t.Errorf("maskQuery(%q) = %q; want %q", query, got, want)
		}
	}
}
