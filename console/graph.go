package console

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/relais/relais/engine/process"
)

// The process graph is drawn on the server as inline SVG: no script, no
// inline style (the CSP forbids both), only presentation attributes and
// console.css classes. The layout is layered by depth: a node's column is
// the length of the longest path from start to it (the graph is acyclic),
// each column's nodes stacked in the order a walk from start meets them.

const (
	graphPad     = 16
	graphNodeW   = 256 // a box's least width
	graphNodeH   = 86  // a box's least height
	graphColGap  = 180
	graphRowGap  = 26
	graphLineGap = 16
	graphLaneGap = 8 // between two lanes of edges around boxes

	// graphMaxNodeW is the widest a box grows to hold a word it cannot
	// wrap (a node's name, a definition's key); past it the word is cut
	// into pieces, line by line.
	graphMaxNodeW = 520
	// graphTextInset is the room between a box's edge and its text, on
	// each side.
	graphTextInset = 10
	// Widths of a character, estimated on the wide side (no script
	// measures the text): the name in 12 px monospace bold, the rest in
	// 11 px sans-serif.
	graphNameChar = 7.4
	graphSubChar  = 6.4
)

// graphNode is one box of the drawing.
type graphNode struct {
	X, Y, W, H int
	Class      string
	Name       string
	Sub        string
	Lines      []string // the node's occurrences now, by status
	// Text is what the box shows, line by line: its name, what it is,
	// its counts, each wrapped to the box's width (layout).
	Text []graphLine
	Href string
	// Label is the accessible name of the box's link: every line it
	// shows, whole, in order (WCAG 2.5.3: the name holds the visible
	// words).
	Label string
}

// graphLine is one line of text in a box. Between two lines the drawing
// puts a space, which SVG does not show but a screen reader and axe read
// ("crm pull …", not "crmpull …"), unless Glued: the line goes on with the
// word the line before it cut.
type graphLine struct {
	Class, Text string
	Glued       bool
}

// TextX is where the box's text starts.
func (n graphNode) TextX() string { return strconv.Itoa(n.X + graphTextInset) }

// Gap is what goes before the box's i-th line of Text in the markup: a
// space, unless it is the first or goes on with a word cut (see graphLine).
func (n graphNode) Gap(i int) string {
	if i == 0 || n.Text[i].Glued {
		return ""
	}
	return " "
}

// LineY is the baseline of the box's i-th line of Text.
func (n graphNode) LineY(i int) string { return strconv.Itoa(n.Y + 20 + i*graphLineGap) }

// boxHeight is the height of a box of lines lines: the last baseline, its
// descenders and a margin above the border.
func boxHeight(lines int) int { return max(graphNodeH, 20+(lines-1)*graphLineGap+4+10) }

// textWidth estimates how wide s is drawn at perChar a character.
func textWidth(s string, perChar float64) int {
	return int(float64(utf8.RuneCountInString(s))*perChar + 0.5)
}

// widestWord is the width a box needs to hold n's longest word on one
// line, its insets included.
func (n graphNode) widestWord() int {
	w := textWidth(n.Name, graphNameChar)
	if n.Href == "" { // the hold's name is words
		w = 0
		for _, word := range strings.Fields(n.Name) {
			w = max(w, textWidth(word, graphNameChar))
		}
	}
	for _, l := range append([]string{n.Sub}, n.Lines...) {
		for _, word := range strings.Fields(l) {
			w = max(w, textWidth(word, graphSubChar))
		}
	}
	return w + 2*graphTextInset
}

// layout wraps n's name, kind and counts to a box w wide: a count line
// breaks between its counts (at " · "), other text between words, and a
// word wider than the box (only past graphMaxNodeW) in pieces.
func (n *graphNode) layout(w int) {
	inner := w - 2*graphTextInset
	n.W, n.Text = w, nil
	add := func(class string, lines []wrappedLine) {
		for _, l := range lines {
			n.Text = append(n.Text, graphLine{Class: class, Text: l.Text, Glued: l.Glued})
		}
	}
	if n.Href == "" {
		add("node-name", wrapWords(n.Name, " ", inner, graphNameChar))
	} else {
		add("node-name", wrapWords(n.Name, "", inner, graphNameChar))
	}
	if n.Sub != "" {
		add("node-sub", wrapWords(n.Sub, " ", inner, graphSubChar))
	}
	for _, l := range n.Lines {
		add("node-count", wrapWords(l, " · ", inner, graphSubChar))
	}
	n.H = boxHeight(len(n.Text))
}

// wrapWords breaks s into lines at most inner wide, between its parts
// (split at sep; "" keeps s one part), and a part wider than a line
// between its words, then in pieces: a piece after the first is glued to
// the line before it (one word, read without a space).
func wrapWords(s, sep string, inner int, perChar float64) []wrappedLine {
	parts := []string{s}
	if sep != "" {
		parts = strings.Split(s, sep)
	}
	var lines []wrappedLine
	cur := wrappedLine{}
	for _, part := range parts {
		switch {
		case cur.Text == "":
			cur.Text = part
		case textWidth(cur.Text+sep+part, perChar) <= inner:
			cur.Text += sep + part
		default:
			lines = append(lines, cur)
			cur = wrappedLine{Text: part}
		}
		if textWidth(cur.Text, perChar) > inner {
			if sep != " " && strings.Contains(cur.Text, " ") {
				// A count wider than the line: between its words.
				words := wrapWords(cur.Text, " ", inner, perChar)
				words[0].Glued = cur.Glued
				lines = append(lines, words[:len(words)-1]...)
				cur = words[len(words)-1]
				continue
			}
			// One word wider than the box at its widest: in pieces.
			r := []rune(cur.Text)
			per := max(1, int(float64(inner)/perChar))
			for len(r) > per {
				lines = append(lines, wrappedLine{Text: string(r[:per]), Glued: cur.Glued})
				r = r[per:]
				cur.Glued = true
			}
			cur.Text = string(r)
		}
	}
	return append(lines, cur)
}

// wrappedLine is one line of wrapped text; Glued when it goes on with the
// word the line before it cut.
type wrappedLine struct {
	Text  string
	Glued bool
}

// graphEdge is one arrow of the drawing.
type graphEdge struct {
	D          string // the path
	Class      string
	Marker     string
	Labels     []edgeLabel // one line per route or code
	LabelClass string
}

// edgeLabel is one line of an edge's label.
type edgeLabel struct {
	Text, X, Y string
}

// graphView is a drawn process version.
type graphView struct {
	Width, Height string
	ViewBox       string
	Title, Desc   string
	Nodes         []graphNode
	Edges         []graphEdge
}

// graphEdgeSpec is an edge before layout.
type graphEdgeSpec struct {
	from, to string
	labels   []string
	err      bool
}

// graphOf lays out p. lines gives each node's count lines; the hold
// pseudo-node and an unlabelled error edge are named in the reader's
// language.
func graphOf(ctx context.Context, p *process.Process, lines map[string][]string) graphView {
	names := slices.Sorted(maps.Keys(p.Nodes))
	specs, holds := edgesOf(ctx, p, names)
	all := names
	if holds {
		all = append(slices.Clip(names), process.Hold)
	}
	columns := columnsOf(p.Start, all, specs)
	maxRows := 0
	for _, col := range columns {
		maxRows = max(maxRows, len(col))
	}
	// Every box is as wide as the widest word of any (within bounds) and
	// as tall as the most lines any has, so that columns and rows line
	// up.
	boxes := map[string]graphNode{}
	nodeW, nodeH := graphNodeW, graphNodeH
	for _, name := range all {
		gn := nodeBox(ctx, p, name, lines[name])
		boxes[name] = gn
		nodeW = max(nodeW, min(gn.widestWord(), graphMaxNodeW))
	}
	for name, gn := range boxes {
		gn.layout(nodeW)
		boxes[name] = gn
		nodeH = max(nodeH, gn.H)
	}
	width := 2*graphPad + len(columns)*nodeW + (len(columns)-1)*graphColGap
	height := 2*graphPad + maxRows*nodeH + (maxRows-1)*graphRowGap
	g := graphView{Width: strconv.Itoa(width)}
	at := map[string]graphNode{}
	for d, col := range columns {
		colH := len(col)*nodeH + (len(col)-1)*graphRowGap
		y0 := graphPad + (height-2*graphPad-colH)/2
		for i, name := range col {
			gn := boxes[name]
			gn.H = nodeH
			gn.X, gn.Y = graphPad+d*(nodeW+graphColGap), y0+i*(nodeH+graphRowGap)
			at[name] = gn
			g.Nodes = append(g.Nodes, gn)
		}
	}
	g.Edges, height = drawEdges(specs, at, g.Nodes, height)
	// A lane below the boxes may have made the drawing taller.
	g.Height, g.ViewBox = strconv.Itoa(height), "0 0 "+strconv.Itoa(width)+" "+strconv.Itoa(height)
	return g
}

// edgesOf lists p's edges, merged per (from, to, kind) so that parallel
// routes share a label; holds says whether an error edge goes to the hold
// pseudo-node.
func edgesOf(ctx context.Context, p *process.Process, names []string) (specs []*graphEdgeSpec, holds bool) {
	type key struct {
		from, to string
		err      bool
	}
	merged := map[key]*graphEdgeSpec{}
	add := func(from, to, label string, isErr bool) {
		s := merged[key{from, to, isErr}]
		if s == nil {
			s = &graphEdgeSpec{from: from, to: to, err: isErr}
			merged[key{from, to, isErr}] = s
			specs = append(specs, s)
		}
		if label != "" {
			s.labels = append(s.labels, label)
		}
	}
	for _, name := range names {
		n := p.Nodes[name]
		for _, route := range slices.Sorted(maps.Keys(n.Routes)) {
			add(name, n.Routes[route], route, false)
		}
		if n.Next != "" {
			add(name, n.Next, "", false)
		}
		for _, code := range slices.Sorted(maps.Keys(n.OnError.Codes)) {
			if code == process.AnyCode {
				continue
			}
			t := n.OnError.Codes[code]
			holds = holds || t == process.Hold
			add(name, t, code, true)
		}
		if t := n.OnError.Default; t != "" {
			holds = holds || t == process.Hold
			label := T(ctx, "on error")
			if n.OnError.Codes != nil {
				label = T(ctx, "any other error")
			}
			add(name, t, label, true)
		}
	}
	return specs, holds
}

// columnsOf places every node of all in a column, its depth: the length of
// the longest path from start to it. Within a column, nodes are in the
// order a breadth-first walk from start meets them; nodes it never meets
// (unreachable ones, which publishing refuses, are shown, not hidden)
// come last, in all's order.
func columnsOf(start string, all []string, specs []*graphEdgeSpec) [][]string {
	// Bellman-style relaxation: the graph is a DAG, so |nodes| rounds
	// suffice.
	depth := map[string]int{start: 0}
	for range len(all) + 1 {
		changed := false
		for _, s := range specs {
			d, ok := depth[s.from]
			if !ok {
				continue
			}
			if cur, seen := depth[s.to]; !seen || cur < d+1 {
				depth[s.to] = d + 1
				changed = true
			}
		}
		if !changed {
			break
		}
	}
	out := map[string][]*graphEdgeSpec{}
	for _, s := range specs {
		out[s.from] = append(out[s.from], s)
	}
	order := map[string]int{start: 0}
	queue := []string{start}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, s := range out[cur] {
			if _, ok := order[s.to]; !ok {
				order[s.to] = len(order)
				queue = append(queue, s.to)
			}
		}
	}
	for _, n := range all {
		if _, ok := order[n]; !ok {
			order[n] = len(order)
		}
	}
	maxDepth := 0
	for _, n := range all {
		maxDepth = max(maxDepth, depth[n]) // an unreachable node is at 0
	}
	columns := make([][]string, maxDepth+1)
	for _, n := range all {
		columns[depth[n]] = append(columns[depth[n]], n)
	}
	for _, col := range columns {
		slices.SortFunc(col, func(a, b string) int { return order[a] - order[b] })
	}
	return columns
}

// nodeBox is the box of node name, before it is placed.
func nodeBox(ctx context.Context, p *process.Process, name string, lines []string) graphNode {
	gn := graphNode{W: graphNodeW, H: graphNodeH, Name: name, Class: "node", Href: "#node-" + name}
	if name == process.Hold {
		gn.Class += " hold"
		gn.Name = T(ctx, "held for an operator")
		gn.Sub = T(ctx, "an incident: retry, abandon or stop")
		gn.Href = ""
		gn.Lines = lines
		return gn
	}
	n := p.Nodes[name]
	switch n.Kind {
	case process.KindEnd:
		gn.Class += " end"
		gn.Sub = T(ctx, "end: completes the instance")
		if n.Status == process.StatusFailed {
			gn.Class += " end-failed"
			gn.Sub = T(ctx, "end: fails the instance")
		}
	case process.KindPush:
		gn.Sub = T(ctx, "push %s", definitionAtRevision(ctx, n.Definition, n.Revision))
	default:
		gn.Sub = T(ctx, "pull %s", definitionAtRevision(ctx, n.Definition, n.Revision))
	}
	if name == p.Start {
		gn.Class += " start"
	}
	gn.Lines = lines
	// The link's name says what the box shows, in its order ("crm, pull
	// add_company_to_crm, revision 1: available 5, deferred 2, …"), so that
	// it holds the visible words (label in name).
	gn.Label = name + ", " + gn.Sub
	if len(lines) > 0 {
		counts := strings.ReplaceAll(strings.Join(lines, " · "), " · ", ", ")
		// TRANSLATORS: the name of a process graph's box for screen readers: its node, what it is, its counts ("crm, pull add_company_to_crm, revision 1: available 5, failed 2").
		gn.Label = T(ctx, "%s, %s: %s", name, gn.Sub, counts)
	}
	return gn
}

// drawEdges draws specs between the placed boxes at; it returns the
// drawing's height, grown when a lane passes below the lowest box.
func drawEdges(specs []*graphEdgeSpec, at map[string]graphNode, boxes []graphNode, height int) ([]graphEdge, int) {
	// A success and a failure between the same two nodes are drawn apart.
	both := map[[2]string]int{}
	for _, s := range specs {
		both[[2]string{s.from, s.to}]++
	}
	var edges []graphEdge
	var lanes [][3]int  // the lanes taken: height, from x, to x
	var placed [][4]int // the labels drawn: left, top, right, bottom
	for _, s := range specs {
		a, b := at[s.from], at[s.to]
		shift := 0
		if both[[2]string{s.from, s.to}] > 1 {
			shift = -10
			if s.err {
				shift = 10
			}
		}
		x1, y1 := a.X+a.W, a.Y+a.H/2+shift
		x2, y2 := b.X-6, b.Y+b.H/2+shift // the arrowhead ends at the box
		c := graphColGap / 2
		e := graphEdge{Class: "edge", Marker: "url(#arrow)", LabelClass: "edge-label"}
		e.D = "M" + strconv.Itoa(x1) + " " + strconv.Itoa(y1) +
			" C" + strconv.Itoa(x1+c) + " " + strconv.Itoa(y1) + " " + strconv.Itoa(x2-c) + " " + strconv.Itoa(y2) +
			" " + strconv.Itoa(x2) + " " + strconv.Itoa(y2)
		if lane, above, ok := laneAround(boxes, a, b, y1, y2, shift); ok {
			// Into the lane within the first gap, along it past the boxes
			// in between, out of it within the last gap.
			in, out := x1+graphColGap-graphColGap/4, x2-graphColGap+graphColGap/4
			// Apart from the lanes other edges took over the same columns,
			// further out.
			for moved := true; moved; {
				moved = false
				for _, u := range lanes {
					if u[0]-graphLaneGap < lane && lane < u[0]+graphLaneGap && u[1] < out && in < u[2] {
						if above {
							lane -= graphLaneGap
						} else {
							lane += graphLaneGap
						}
						moved = true
					}
				}
			}
			lanes = append(lanes, [3]int{lane, in, out})
			h := (in - x1) / 2
			e.D = "M" + strconv.Itoa(x1) + " " + strconv.Itoa(y1) +
				" C" + strconv.Itoa(x1+h) + " " + strconv.Itoa(y1) + " " + strconv.Itoa(in-h) + " " + strconv.Itoa(lane) + " " + strconv.Itoa(in) + " " + strconv.Itoa(lane) +
				" L" + strconv.Itoa(out) + " " + strconv.Itoa(lane) +
				" C" + strconv.Itoa(out+h) + " " + strconv.Itoa(lane) + " " + strconv.Itoa(x2-h) + " " + strconv.Itoa(y2) + " " + strconv.Itoa(x2) + " " + strconv.Itoa(y2)
			height = max(height, lane+graphPad/2)
		}
		if s.err {
			e.Class += " edge-error"
			e.Marker = "url(#arrow-error)"
			e.LabelClass += " error"
		}
		// The label ends just before the arrowhead, one line per route
		// or code, above the curve (below the lower of two parallel
		// edges). Edges from several nodes into one box end at the same
		// point: a block that would cover labels already placed moves
		// further out, line by line, until it covers none.
		below := shift > 0
		top := y2 - 6 - (len(s.labels)-1)*graphLabelLine
		if below {
			top = y2 + 15
		}
		for overlaps(placed, x2-10, top, s.labels) {
			switch {
			case below || top-graphLabelLine < graphLabelLine:
				// No room above the drawing: further down instead.
				below = true
				top += graphLabelLine
			default:
				top -= graphLabelLine
			}
		}
		for i, l := range s.labels {
			y := top + i*graphLabelLine
			e.Labels = append(e.Labels, edgeLabel{Text: l, X: strconv.Itoa(x2 - 10), Y: strconv.Itoa(y)})
			placed = append(placed, labelBox(x2-10, y, l))
			height = max(height, y+graphPad/2)
		}
		edges = append(edges, e)
	}
	return edges, height
}

// graphLabelLine is the height of a line of edge labels.
const graphLabelLine = 13

// labelBox is the area a label ending at x on baseline y covers, its
// width estimated from its length (11 px text: about 6.5 px a character).
func labelBox(x, y int, text string) [4]int {
	w := (utf8.RuneCountInString(text)*13 + 1) / 2
	return [4]int{x - w, y - 10, x, y + 3}
}

// overlaps reports whether the lines ending at x from baseline top would
// cover any of the areas placed.
func overlaps(placed [][4]int, x, top int, lines []string) bool {
	for i, l := range lines {
		b := labelBox(x, top+i*graphLabelLine, l)
		for _, p := range placed {
			if b[0] < p[2] && p[0] < b[2] && b[1] < p[3] && p[1] < b[3] {
				return true
			}
		}
	}
	return false
}

// laneAround returns the height of a horizontal lane that an edge from a
// to b takes around the boxes of the columns it skips, when the curve
// between them would cross one; ok is false when it crosses none (an edge
// to the next column never does). The lane passes above the boxes in its
// way when there is room above them, below them otherwise (the drawing
// grows to hold it); an error edge drawn beside a success takes the other
// side's lane a little further out.
func laneAround(nodes []graphNode, a, b graphNode, y1, y2, shift int) (lane int, above, ok bool) {
	const gap = graphRowGap / 2
	top, bottom := -1, -1
	crossed := false
	for _, n := range nodes {
		if n.X <= a.X || n.X >= b.X {
			continue
		}
		// Where the curve is at the middle of n's column, roughly: it is
		// near straight between its ends' columns.
		mid := n.X + n.W/2
		y := y1 + (y2-y1)*(mid-(a.X+a.W))/(b.X-(a.X+a.W))
		if y >= n.Y-gap && y <= n.Y+n.H+gap {
			crossed = true
		}
		if top < 0 || n.Y < top {
			top = n.Y
		}
		bottom = max(bottom, n.Y+n.H)
	}
	if !crossed {
		return 0, false, false
	}
	if y := top - gap + shift/2; y >= graphPad/2+graphLaneGap && shift <= 0 {
		return y, true, true
	}
	return bottom + gap + shift/2, false, true
}

func itoaInt(n int) string { return strconv.Itoa(n) }
