package engine

import (
	"fmt"

	"github.com/relais/relais/internal/fault"
)

// tooLong is the problem of a free-text field over its documented maximum.
// Lengths are counted in bytes of UTF-8, the unit PostgreSQL's index rows
// are bounded in.
func tooLong(path string, maxBytes int) fault.FieldError {
	return fault.FieldError{Path: path, Message: fmt.Sprintf("is longer than %d bytes", maxBytes)}
}
