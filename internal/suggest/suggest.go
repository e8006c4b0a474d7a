// Package suggest finds the name a misspelt one most likely meant, for
// error messages that answer "did you mean …?".
package suggest

import (
	"fmt"
	"slices"
	"strings"
)

// Hint returns ` (did you mean "x"?)` for the candidate Closest to name,
// or "" when none is.
func Hint(name string, candidates []string) string {
	best, ok := Closest(name, candidates)
	if !ok {
		return ""
	}
	return Meant(best)
}

// Meant is the hint naming the name meant: ` (did you mean "x"?)`.
func Meant(name string) string { return fmt.Sprintf(" (did you mean %q?)", name) }

// Closest returns the candidate closest to name when it is close enough to
// be a typo of it: at most two edits (a swap of two neighbours is one) and
// fewer than half of name's length. A candidate equal to name is no typo:
// then, as when none is close, ok is false. Ties go to the earlier
// candidate. A candidate that differs only in letter case is meant first
// (QA_PUSH_SLOW for qa_push_slow, too far apart in edits). With none
// close, a name without its namespace (approve for suppliers.approve)
// means the one candidate it ends.
func Closest(name string, candidates []string) (best string, ok bool) {
	if slices.Contains(candidates, name) {
		return "", false
	}
	for _, c := range candidates {
		if strings.EqualFold(c, name) {
			return c, true
		}
	}
	bestD := 0
	for _, c := range candidates {
		d := distance(name, c)
		if d <= 2 && 2*d < len([]rune(name)) && (!ok || d < bestD) {
			best, bestD, ok = c, d, true
		}
	}
	if !ok && name != "" && !strings.Contains(name, ".") {
		for _, c := range candidates {
			if strings.HasSuffix(c, "."+name) {
				if ok {
					return "", false // two namespaces have it: say neither
				}
				best, ok = c, true
			}
		}
	}
	return best, ok
}

// Missing returns ` (did you mean "x"?)` for the candidate one edit away
// from name, or differing from it only in case, or "": for a required name
// that is missing, that is a typo of it however short the name (`ur` or
// `URL` for a missing `url`), where Closest's rule would let it pass as
// another word.
func Missing(name string, missing []string) string {
	if hint := Hint(name, missing); hint != "" {
		return hint
	}
	for _, m := range missing {
		if distance(name, m) == 1 || strings.EqualFold(name, m) {
			return Meant(m)
		}
	}
	return ""
}

// distance is the optimal string alignment distance between a and b, in
// runes: insertions, deletions, substitutions and swaps of neighbours.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// Three rows of the table: two back for swaps.
	prev2, prev, cur := make([]int, len(y)+1), make([]int, len(y)+1), make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}

// synonyms are names other task platforms' clients, APIs and docs use
// (Zeebe, Camunda, Temporal) for Relais's, and a contract's keys written
// short or with another usual word: too far from the name meant to be
// read as typos.
var synonyms = map[string][]string{
	"min":                  {"minimum"},
	"max":                  {"maximum"},
	"mandatory":            {"required"},
	"enum_values":          {"values"},
	"choices":              {"values"},
	"error_message":        {"message"},
	"errorMessage":         {"message"},
	"error":                {"error_code"},
	"retries":              {"attempts_left", "max_attempts"},
	"retry_backoff":        {"retry_delay"},
	"retryBackOff":         {"retry_delay"},
	"retryBackoff":         {"retry_delay"},
	"backoff":              {"retry_backoff", "retry_delay"},
	"retryTimeout":         {"retry_delay"},
	"initialInterval":      {"retry_delay"},
	"initial_interval":     {"retry_delay"},
	"backoffCoefficient":   {"retry_backoff"},
	"backoff_coefficient":  {"retry_backoff"},
	"maximumInterval":      {"max_retry_delay"},
	"maximum_interval":     {"max_retry_delay"},
	"maxInterval":          {"max_retry_delay"},
	"max_interval":         {"max_retry_delay"},
	"max_delay":            {"max_retry_delay"},
	"maximumAttempts":      {"max_attempts"},
	"maxAttempts":          {"max_attempts"},
	"retryDelay":           {"retry_delay"},
	"maxRetryDelay":        {"max_retry_delay"},
	"maximum_attempts":     {"max_attempts"},
	"variables":            {"outputs", "inputs"},
	"fetchVariables":       {"fields"},
	"fetchVariable":        {"fields"},
	"fetch_variables":      {"fields"},
	"timeout":              {"lock_duration"},
	"maxJobsToActivate":    {"max_tasks"},
	"requestTimeout":       {"wait"},
	"asyncResponseTimeout": {"wait"},
	"jobType":              {"definition"},
	"topicName":            {"definition"},
	"topics":               {"subscriptions"},
	"worker":               {"worker_id"},
	// A node pins a revision by number; a release only names one
	// (designer QA: release: "2027.02" on a node).
	"release": {"revision"},
}

// Synonym returns ` (did you mean "x"?)` for the first of candidates that
// name stands for (see synonyms), or "".
func Synonym(name string, candidates []string) string {
	for _, meant := range synonyms[name] {
		for _, c := range candidates {
			if c == meant {
				return Meant(meant)
			}
		}
	}
	return ""
}
