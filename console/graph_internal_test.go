package console

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/engine/process"
)

// An edge that skips columns goes around the boxes in between, in a lane
// above or below them, instead of through them; an edge to the next
// column stays one curve.
func TestGraphEdgesGoAroundTheBoxesTheySkip(t *testing.T) {
	pull := func(next string, onError string) *process.Node {
		n := &process.Node{Kind: process.KindPull, Definition: "d", Revision: 1, Next: next}
		if onError != "" {
			n.OnError = process.OnError{Default: onError}
		}
		return n
	}
	p := &process.Process{Start: "a", Nodes: map[string]*process.Node{
		"a":    pull("b", "c"), // a's error edge to c skips b's column
		"b":    pull("c", ""),
		"c":    pull("done", ""),
		"done": {Kind: process.KindEnd},
	}}
	g := graphOf(context.Background(), p, nil)
	boxes := map[string]graphNode{}
	for _, n := range g.Nodes {
		boxes[n.Name] = n
	}
	height, _ := strconv.Atoi(g.Height)
	var lanes int
	for _, e := range g.Edges {
		if !strings.Contains(e.D, " L") {
			continue
		}
		lanes++
		// M x y C … x y L x lane C …: the lane's height is the L's.
		f := strings.Fields(e.D[strings.Index(e.D, " L")+2:])
		lane, _ := strconv.Atoi(f[1])
		for _, name := range []string{"b"} {
			if n := boxes[name]; lane >= n.Y && lane <= n.Y+n.H {
				t.Errorf("the lane at %d crosses box %s (%d to %d): %s", lane, name, n.Y, n.Y+n.H, e.D)
			}
		}
		if lane < 0 || lane > height {
			t.Errorf("the lane at %d is outside the drawing (height %d)", lane, height)
		}
		if !strings.Contains(e.Class, "edge-error") {
			t.Errorf("the edge around the boxes is %q, want the error edge a → c", e.Class)
		}
	}
	if lanes != 1 {
		t.Errorf("%d edges take a lane, want 1 (a → c): %+v", lanes, g.Edges)
	}
}

// Two edges around the same boxes take lanes apart, not one on the other.
func TestGraphLanesDoNotOverlap(t *testing.T) {
	pull := func(next, onError string) *process.Node {
		return &process.Node{Kind: process.KindPull, Definition: "d", Revision: 1, Next: next, OnError: process.OnError{Default: onError}}
	}
	p := &process.Process{Start: "a", Nodes: map[string]*process.Node{
		"a": pull("b", "d"), "b": pull("c", "d"), "c": pull("d", ""), "d": {Kind: process.KindEnd},
	}}
	g := graphOf(context.Background(), p, nil)
	var lanes []int
	for _, e := range g.Edges {
		if i := strings.Index(e.D, " L"); i >= 0 {
			lane, _ := strconv.Atoi(strings.Fields(e.D[i+2:])[1])
			lanes = append(lanes, lane)
		}
	}
	if len(lanes) != 2 {
		t.Fatalf("lanes %v, want 2 (a → d and b → d): %+v", lanes, g.Edges)
	}
	if d := lanes[0] - lanes[1]; d > -graphLaneGap && d < graphLaneGap {
		t.Errorf("lanes at %d and %d overlap", lanes[0], lanes[1])
	}
}

// Edges from several nodes into one box end at the same point: their
// labels are stacked apart, none drawn over another.
func TestGraphLabelsIntoOneBoxDoNotOverlap(t *testing.T) {
	route := func(routes map[string]string, codes map[string]string, def string) *process.Node {
		return &process.Node{Kind: process.KindPull, Definition: "d", Revision: 1, Routes: routes, OnError: process.OnError{Codes: codes, Default: def}}
	}
	p := &process.Process{Start: "assess", Nodes: map[string]*process.Node{
		"assess":      route(map[string]string{"approve": "pay", "reject": "rejected", "fraudulent": "investigate"}, map[string]string{"MISSING_DOCUMENTS": "investigate"}, "investigate"),
		"investigate": route(map[string]string{"genuine": "pay", "fraudulent": "rejected"}, nil, "rejected"),
		"pay":         {Kind: process.KindPull, Definition: "d", Revision: 1, Next: "paid", OnError: process.OnError{Default: "rejected"}},
		"paid":        {Kind: process.KindEnd},
		"rejected":    {Kind: process.KindEnd, Status: process.StatusFailed},
	}}
	g := graphOf(context.Background(), p, nil)
	var boxes [][4]int
	var texts []string
	for _, e := range g.Edges {
		for _, l := range e.Labels {
			x, _ := strconv.Atoi(l.X)
			y, _ := strconv.Atoi(l.Y)
			boxes = append(boxes, labelBox(x, y, l.Text))
			texts = append(texts, l.Text)
		}
	}
	if len(boxes) < 6 {
		t.Fatalf("labels %q; want every route and code drawn", texts)
	}
	for i := range boxes {
		for j := range i {
			a, b := boxes[i], boxes[j]
			if a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3] {
				t.Errorf("label %q at %v is drawn over %q at %v", texts[i], a, texts[j], b)
			}
		}
	}
	height, _ := strconv.Atoi(g.Height)
	for i, b := range boxes {
		if b[1] < 0 || b[3] > height {
			t.Errorf("label %q at %v is outside the drawing (height %d)", texts[i], b, height)
		}
	}
}

// A push node without a timeout of its own shows the one it runs with,
// the configured default, said to be so.
func TestPushPolicyShowsTheTimeoutItRunsWith(t *testing.T) {
	p := &process.Process{Start: "call", Nodes: map[string]*process.Node{
		"call": {Kind: process.KindPush, Definition: "d", Revision: 1, Destination: "x", Next: "done"},
		"set":  {Kind: process.KindPush, Definition: "d", Revision: 1, Destination: "x", Next: "done", Timeout: 2 * time.Second},
		"done": {Kind: process.KindEnd},
	}}
	lim := process.Limits{DefaultPushTimeout: 3 * time.Second}
	for node, want := range map[string]string{"call": "timeout 3 seconds (the default)", "set": "timeout 2 seconds"} {
		if got := nodeRowOf(context.Background(), p, node, nil, "k", lim).Policy; got != want {
			t.Errorf("%s: policy %q, want %q", node, got, want)
		}
	}
}
