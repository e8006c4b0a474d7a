package openapi_test

import (
	"testing"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
)

// The tests that hold the document to a server's answers run one on a
// database of their own.
func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }
