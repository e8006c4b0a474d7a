package console

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/relais/relais/engine/process"
)

// The process graph is drawn on the server as inline SVG: no script, no
// inline style (the CSP forbids both), only presentation attributes and
// console.css classes. The layout is layered by depth: a node's column is
// the length of the longest path from start to it (the graph is acyclic),
// each column's nodes stacked in the order a walk from start meets them.

const (
	graphPad     = 16
	graphNodeW   = 256
	graphNodeH   = 86
	graphColGap  = 180
	graphRowGap  = 26
	graphLineGap = 16
	graphLaneGap = 8 // between two lanes of edges around boxes
)

// graphNode is one box of the drawing.
type graphNode struct {
	X, Y, W, H int
	Class      string
	Name       string
	Sub        string
	Lines      []string // the node's occurrences now, by status
	Href       string
	Label      string // accessible name of the box's link
}

// TextX is where the box's text starts.
func (n graphNode) TextX() string { return strconv.Itoa(n.X + 10) }

// LineY is the baseline of the box's i-th line (0 is the name).
func (n graphNode) LineY(i int) string { return strconv.Itoa(n.Y + 20 + i*graphLineGap) }

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

// graphOf lays out p. lines gives each node's count lines; holdLabel and
// errorLabel name the hold pseudo-node and an unlabelled error edge in the
// reader's language.
func graphOf(ctx context.Context, p *process.Process, lines map[string][]string) graphView {
	names := slices.Sorted(maps.Keys(p.Nodes))
	// Edges, merged per (from, to, kind) so parallel routes share a label.
	var specs []*graphEdgeSpec
	add := func(from, to, label string, isErr bool) {
		for _, s := range specs {
			if s.from == from && s.to == to && s.err == isErr {
				if label != "" {
					s.labels = append(s.labels, label)
				}
				return
			}
		}
		s := &graphEdgeSpec{from: from, to: to, err: isErr}
		if label != "" {
			s.labels = []string{label}
		}
		specs = append(specs, s)
	}
	holds := false
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

	// Depth: the longest path from start (Bellman-style relaxation; the
	// graph is a DAG, so |nodes| rounds suffice).
	depth := map[string]int{p.Start: 0}
	for range len(names) + 1 {
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
	for _, n := range names {
		if _, ok := depth[n]; !ok {
			depth[n] = 0 // unreachable (publishing refuses it): shown, not hidden
		}
	}
	// Order within a column: breadth-first from start.
	order := map[string]int{}
	queue := []string{p.Start}
	order[p.Start] = 0
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, s := range specs {
			if s.from == cur {
				if _, ok := order[s.to]; !ok {
					order[s.to] = len(order)
					queue = append(queue, s.to)
				}
			}
		}
	}
	all := append([]string{}, names...)
	if holds {
		all = append(all, process.Hold)
	}
	for _, n := range all {
		if _, ok := order[n]; !ok {
			order[n] = len(order)
		}
	}
	columns := map[int][]string{}
	maxDepth, maxRows := 0, 0
	for _, n := range all {
		d := depth[n]
		columns[d] = append(columns[d], n)
		maxDepth = max(maxDepth, d)
	}
	for d := range columns {
		slices.SortFunc(columns[d], func(a, b string) int { return order[a] - order[b] })
		maxRows = max(maxRows, len(columns[d]))
	}
	width := 2*graphPad + (maxDepth+1)*graphNodeW + maxDepth*graphColGap
	height := 2*graphPad + maxRows*graphNodeH + (maxRows-1)*graphRowGap
	g := graphView{Width: strconv.Itoa(width), Height: strconv.Itoa(height),
		ViewBox: "0 0 " + strconv.Itoa(width) + " " + strconv.Itoa(height)}
	at := map[string]graphNode{}
	for d := 0; d <= maxDepth; d++ {
		col := columns[d]
		colH := len(col)*graphNodeH + (len(col)-1)*graphRowGap
		y0 := graphPad + (height-2*graphPad-colH)/2
		for i, name := range col {
			gn := graphNode{X: graphPad + d*(graphNodeW+graphColGap), Y: y0 + i*(graphNodeH+graphRowGap), W: graphNodeW, H: graphNodeH,
				Name: name, Class: "node", Href: "#node-" + name}
			if name == process.Hold {
				gn.Class += " hold"
				gn.Name = T(ctx, "held for an operator")
				gn.Sub = T(ctx, "an incident: retry, abandon or stop")
				gn.Href = ""
			} else {
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
				gn.Lines = lines[name]
				gn.Label = T(ctx, "Node %s", name)
			}
			at[name] = gn
			g.Nodes = append(g.Nodes, gn)
		}
	}
	// A success and a failure between the same two nodes are drawn apart.
	both := map[[2]string]int{}
	for _, s := range specs {
		both[[2]string{s.from, s.to}]++
	}
	var lanes [][3]int // the lanes taken: height, from x, to x
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
		if lane, above, ok := laneAround(g.Nodes, a, b, y1, y2, shift); ok {
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
			if lane+graphPad/2 > height {
				height = lane + graphPad/2
			}
		}
		if s.err {
			e.Class += " edge-error"
			e.Marker = "url(#arrow-error)"
			e.LabelClass += " error"
		}
		// The label ends just before the arrowhead, one line per route
		// or code, above the curve (below the lower of two parallel
		// edges): arrows into different boxes are a row apart there.
		for i, l := range s.labels {
			y := y2 - 6 - (len(s.labels)-1-i)*13
			if shift > 0 {
				y = y2 + 15 + i*13
			}
			e.Labels = append(e.Labels, edgeLabel{Text: l, X: strconv.Itoa(x2 - 10), Y: strconv.Itoa(y)})
		}
		g.Edges = append(g.Edges, e)
	}
	// A lane below the boxes may have made the drawing taller.
	g.Height, g.ViewBox = strconv.Itoa(height), "0 0 "+strconv.Itoa(width)+" "+strconv.Itoa(height)
	return g
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
