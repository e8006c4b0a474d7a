package stream

import (
	"strings"
	"testing"

	workerv1 "github.com/relais/relais/proto/relais/worker/v1"
)

// A member of the wrong JSON type, at any depth, is named with what its
// field takes: protobuf's JSON says only "unexpected token" at a column
// (verifier QA: "revisions": "all" in a subscription).
func TestStrictJSONNamesTheMemberOfTheWrongType(t *testing.T) {
	t.Parallel()
	codec := strictJSON{"json"}
	for _, tc := range []struct{ body, want string }{
		{`{"workerId": "w", "subscriptions": [{"definition": "crm", "revisions": "all"}]}`, "(subscriptions[0].revisions is a list, as [1, 2])"},
		{`{"workerId": "w", "subscriptions": [{"definition": "crm", "revisions": [1, "all"]}]}`, "(subscriptions[0].revisions[1] is a number)"},
		{`{"workerId": "w", "subscriptions": {"definition": "crm"}}`, "(subscriptions is a list, as [{…}])"},
		{`{"workerId": "w", "subscriptions": ["crm"]}`, "(subscriptions[0] is an object)"},
		{`{"workerId": "w", "maxInFlight": "eight"}`, "(maxInFlight is a number)"},
		{`{"worker_id": 7}`, "(worker_id is a string)"},
		{`{"workerId": "w", "resumable": "yes"}`, "(resumable is true or false)"},
		{`{"workerId": "w", "lockDuration": 60}`, `(lockDuration is a duration: a string of seconds ending in s, as "60s")`},
		// The member protobuf names, not the first in key order
		// (verifier QA: the hint named maxInFlight beside workerId's
		// error).
		{`{"workerId": "a", "subscriptions": [{"definition": "crm", "revisions": [1, "x"]}], "maxInFlight": "y"}`, "(subscriptions[0].revisions[1] is a number)"},
	} {
		err := codec.Unmarshal([]byte(tc.body), &workerv1.SubscribeRequest{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Unmarshal(%s) = %v, want it to say %s", tc.body, err, tc.want)
		}
	}
	// protobuf's own words name the member: no hint about another.
	if err := codec.Unmarshal([]byte(`{"workerId": 7, "maxInFlight": "x"}`), &workerv1.SubscribeRequest{}); err == nil || strings.Contains(err.Error(), "maxInFlight") {
		t.Errorf("workerId 7 beside maxInFlight x: %v, want no word of maxInFlight", err)
	}
	// What protobuf takes is no mismatch: quoted numbers, an empty list.
	for _, body := range []string{
		`{"workerId": "w", "maxInFlight": "8", "subscriptions": [{"definition": "crm", "revisions": ["1", 2]}]}`,
		`{"workerId": "w", "subscriptions": [], "lockDuration": "60s"}`,
	} {
		if err := codec.Unmarshal([]byte(body), &workerv1.SubscribeRequest{}); err != nil {
			t.Errorf("Unmarshal(%s) = %v, want it taken", body, err)
		}
	}
}
