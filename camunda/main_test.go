package camunda_test

import (
	"testing"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }
