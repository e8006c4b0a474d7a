package console

import "time"

// SetClock replaces the clock sessions expire by; call it before serving.
func SetClock(c *Console, now func() time.Time) { c.now = now }
