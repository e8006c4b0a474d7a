package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// environment describes where the figures were measured.
type environment struct {
	Postgres          string `json:"postgres"`
	Fsync             string `json:"fsync"`
	SynchronousCommit string `json:"synchronous_commit"`
	Embedded          bool   `json:"embedded_postgres"`
	GoVersion         string `json:"go"`
	CPUs              int    `json:"cpus"`
	River             string `json:"river"`
	// RiverTuned is the tuned client's fetch settings.
	RiverTuned string `json:"river_tuned"`
}

// report is the whole run: --json prints it as is.
type report struct {
	Options      options       `json:"options"`
	Environment  environment   `json:"environment"`
	Measurements []measurement `json:"measurements"`
	Ratios       []ratio       `json:"ratios"`
	Seconds      float64       `json:"seconds"`
}

// ratio is Relais's figure divided by River tuned's for one metric.
type ratio struct {
	Scenario string  `json:"scenario"`
	Metric   string  `json:"metric"`
	Value    float64 `json:"relais_over_river_tuned"`
	Better   string  `json:"better"`
}

// row is one line of the table: a metric and its value per system.
type row struct {
	scenario, metric, unit, better string
	compare                        bool
	values                         map[string]float64
}

func (r report) rows() []*row {
	var rows []*row
	byKey := map[string]*row{}
	for _, m := range r.Measurements {
		k := m.Scenario + "\x00" + m.Metric
		rw := byKey[k]
		if rw == nil {
			rw = &row{scenario: m.Scenario, metric: m.Metric, unit: m.Unit, better: m.Better, compare: m.Compare, values: map[string]float64{}}
			byKey[k] = rw
			rows = append(rows, rw)
		}
		rw.values[m.System] = m.Value
	}
	return rows
}

func (r report) ratios() []ratio {
	var out []ratio
	for _, rw := range r.rows() {
		a, okA := rw.values[sysRelais]
		b, okB := rw.values[sysRiverTuned]
		if rw.compare && okA && okB && b != 0 {
			out = append(out, ratio{Scenario: rw.scenario, Metric: rw.metric, Value: a / b, Better: rw.better})
		}
	}
	return out
}

func (r report) writeJSON(w io.Writer) error {
	r.Ratios = r.ratios()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeTable prints one line per metric with each system's figure and the
// Relais ÷ River tuned ratio (read it with the metric's direction: above
// 1 is better for a throughput, below 1 for a latency).
func (r report) writeTable(w io.Writer) {
	o, e := r.Options, r.Environment
	fmt.Fprintf(w, "Relais vs River %s — %d workers, %d producers, n=%d, max_tasks %d; PostgreSQL %s (fsync %s, synchronous_commit %s), %s, %d CPUs\n\n",
		riverVersion, o.Workers, o.Producers, o.N, o.MaxTasks, e.Postgres, e.Fsync, e.SynchronousCommit, e.GoVersion, e.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tmetric\tRelais\tRiver tuned\tRiver defaults\tRelais ÷ River tuned\t")
	for _, rw := range r.rows() {
		unit := rw.unit
		if rw.better != "" {
			unit += ", " + rw.better + " is better"
		}
		ratio := ""
		a, okA := rw.values[sysRelais]
		b, okB := rw.values[sysRiverTuned]
		if rw.compare && okA && okB && b != 0 {
			ratio = fmt.Sprintf("%.2f×", a/b)
		}
		fmt.Fprintf(tw, "%s\t%s (%s)\t%s\t%s\t%s\t%s\t\n", rw.scenario, rw.metric, unit,
			cell(rw, sysRelais), cell(rw, sysRiverTuned), cell(rw, sysRiverDefault), ratio)
	}
	tw.Flush()
}

func cell(rw *row, system string) string {
	v, ok := rw.values[system]
	if !ok {
		return "—"
	}
	return formatValue(v, rw.unit)
}

func formatValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case unit == "×":
		return fmt.Sprintf("%.2f×", v)
	case strings.HasSuffix(unit, "/s"):
		return fmt.Sprintf("%.0f", v)
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// thousands writes n with comma separators: 1,000,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
