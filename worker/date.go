package worker

import (
	"encoding/json"
	"fmt"
	"time"
)

// Date is a contract date field (2026-12-01) as a typed handler reads and
// writes it: time.Time reads only RFC 3339 date-times, and refuses a
// date. Its Time is the date's midnight in UTC. Use *Date for an optional
// one: a nil pointer is left out of the outputs.
type Date struct{ time.Time }

// DateOf is the date t falls on in its own location.
func DateOf(t time.Time) Date {
	y, m, d := t.Date()
	return Date{time.Date(y, m, d, 0, 0, 0, 0, time.UTC)}
}

// String is the date as a contract writes it, 2026-12-01.
func (d Date) String() string { return d.Format(time.DateOnly) }

// MarshalJSON writes the date as a contract's date, "2026-12-01".
func (d Date) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a contract's date, "2026-12-01"; null leaves d as it
// is, as encoding/json does for its own types.
func (d *Date) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("worker.Date: a date is a JSON string: %w", err)
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		// Not the value: the message may be stored where values are masked.
		return fmt.Errorf("worker.Date: not a date written YYYY-MM-DD")
	}
	d.Time = t
	return nil
}
