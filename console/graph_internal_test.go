package console

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/PuerkitoBio/goquery"

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
	for node, want := range map[string]string{"call": "timeout 3\u00a0seconds (the default)", "set": "timeout 2\u00a0seconds"} {
		if got := nodeRowOf(context.Background(), p, node, nil, "k", lim).Policy; got != want {
			t.Errorf("%s: policy %q, want %q", node, got, want)
		}
	}
}

// Every box holds its text: as many lines as it has (name, kind, counts)
// fit above its bottom border, every line within its width (a long line
// wraps between counts or words, a box grows for a long name, a word
// wider still is cut in pieces); and each box's link is named with what
// it shows, in order, as axe's label-content-name-mismatch reads it.
func TestGraphBoxesHoldTheirText(t *testing.T) {
	longName := "verify_the_customer_api_key_with_the_vault_before_the_sync"
	longKey := strings.Repeat("customers.", 19) + "add_company"
	p := &process.Process{Start: "crm", Nodes: map[string]*process.Node{
		"crm":    {Kind: process.KindPull, Definition: "add_company_to_crm", Revision: 1, Next: longName, OnError: process.OnError{Default: process.Hold}},
		longName: {Kind: process.KindPull, Definition: longKey, Revision: 12, Next: "done"},
		"done":   {Kind: process.KindEnd},
	}}
	lines := map[string][]string{
		"crm":        {"available 1 234 567 · reserved 12 345 · deferred 2 345 · running 1 · waiting 3 · asleep 9", "completed 2 · failed 7 · cancelled 1", "instances held: 6"},
		process.Hold: {"instances held: 6"},
	}
	g := graphOf(context.Background(), p, lines)
	var sawWrap, sawPieces bool
	for _, n := range g.Nodes {
		last, _ := strconv.Atoi(n.LineY(len(n.Text) - 1))
		if bottom := n.Y + n.H; last+4 > bottom-6 {
			t.Errorf("%s: its last line's baseline is at %d, %d px above the border at %d", n.Name, last, bottom-last, bottom)
		}
		if n.W < graphNodeW || n.W > graphMaxNodeW {
			t.Errorf("%s: %d wide, want %d to %d", n.Name, n.W, graphNodeW, graphMaxNodeW)
		}
		var shown []string
		for _, l := range n.Text {
			per := graphSubChar
			if l.Class == "node-name" {
				per = graphNameChar
			}
			if w := textWidth(l.Text, per); w > n.W-2*graphTextInset {
				t.Errorf("%s: line %q is %d wide in a box %d wide", n.Name, l.Text, w, n.W)
			}
			shown = append(shown, l.Text)
		}
		if n.Name == "crm" && len(n.Text) > 2+len(lines["crm"]) {
			sawWrap = true // its first count line is wider than the box
		}
		if n.Href == "" {
			continue
		}
		if n.Name == longName && !slices.Contains(shown, longName) {
			t.Errorf("the box did not grow to hold the name %q: %q", longName, shown)
		}
		if slices.ContainsFunc(shown, func(s string) bool { return strings.HasPrefix(longKey, s) && s != longKey && !strings.Contains(s, " ") }) {
			sawPieces = true // read whole: its pieces are glued
		}
	}
	// What a screen reader and axe read of each link is its text as drawn,
	// a space between two lines unless the second goes on with a word cut
	// (a11y QA: the lines were read run together, "crmpull …").
	var html strings.Builder
	if err := processGraph(g).Render(context.Background(), &html); err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(html.String()))
	if err != nil {
		t.Fatal(err)
	}
	links := 0
	doc.Find("a").Each(func(_ int, a *goquery.Selection) {
		links++
		label, _ := a.Attr("aria-label")
		if visible, name := nameWords(a.Text()), nameWords(label); !strings.Contains(name, visible) {
			t.Errorf("a link is named %q, which does not hold what it shows %q", label, a.Text())
		}
	})
	if links != 3 {
		t.Errorf("%d links in the drawing, want one a node", links)
	}
	if !sawWrap || !sawPieces {
		t.Errorf("the test saw no wrapped line (%v) or no word in pieces (%v)", sawWrap, sawPieces)
	}
	crm := g.Nodes[slices.IndexFunc(g.Nodes, func(n graphNode) bool { return n.Name == "crm" })]
	if want := "crm, pull add_company_to_crm, revision 1: available 1 234 567, reserved 12 345, deferred 2 345, running 1, waiting 3, asleep 9, completed 2, failed 7, cancelled 1, instances held: 6"; crm.Label != want {
		t.Errorf("crm's link is named %q, want %q", crm.Label, want)
	}
}

// nameWords is s as axe compares a visible text with an accessible name:
// punctuation and symbols dropped, spaces collapsed, lower case.
func nameWords(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPunct(r) || unicode.IsSymbol(r) {
			return -1
		}
		return unicode.ToLower(r)
	}, s)
	return strings.Join(strings.Fields(s), " ")
}
