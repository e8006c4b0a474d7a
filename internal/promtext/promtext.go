// Package promtext reads what a replica's /metrics serves (the Prometheus
// text exposition) into samples: the tests check metrics with it, and the
// bench reads the group commit's counters.
package promtext

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Sample is one line of a Prometheus text exposition: a metric name, its
// labels and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics are the samples of one scrape of /metrics.
type Metrics []Sample

// Get returns the value of the sample of name whose labels include the
// given name-value pairs, summed over the samples that match (so that a
// partial set of labels adds up a family), and whether any matched.
func (m Metrics) Get(name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for _, s := range m {
		if s.Name != name || !s.has(labels) {
			continue
		}
		sum += s.Value
		found = true
	}
	return sum, found
}

// Fataler is what Must reports a missing sample to (a *testing.T).
type Fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Must is Get for a sample that must exist.
func (m Metrics) Must(t Fataler, name string, labels ...string) float64 {
	t.Helper()
	v, ok := m.Get(name, labels...)
	if !ok {
		t.Fatalf("/metrics has no %s%v", name, labels)
	}
	return v
}

// Names returns every metric name scraped, sorted.
func (m Metrics) Names() []string {
	set := map[string]bool{}
	for _, s := range m {
		set[s.Name] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func (s Sample) has(pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v, ok := s.Labels[pairs[i]]; !ok || v != pairs[i+1] {
			return false
		}
	}
	return true
}

// Parse reads a Prometheus text exposition (what /metrics serves):
// comments are skipped, every sample line is kept.
func Parse(text string) (Metrics, error) {
	var out Metrics
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n+1, line, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no metric name")
	}
	s.Name = line[:i]
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, ", ")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.Index(rest, `="`)
			if eq <= 0 {
				return s, fmt.Errorf("malformed labels")
			}
			name := rest[:eq]
			rest = rest[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value")
			}
			s.Labels[name] = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, fmt.Errorf("value: %w", err)
	}
	s.Value = v
	return s, nil
}
