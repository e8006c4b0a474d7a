package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
)

// JSON logs write durations as the text format does, not as bare
// nanoseconds.
func TestJSONLogsWriteDurationsReadably(t *testing.T) {
	var buf bytes.Buffer
	cfg := config.Config{LogFormat: "json"}
	newLogger(cfg, &buf).Info("ready", "startup", 4870*time.Microsecond)
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%s: %v", buf.Bytes(), err)
	}
	if line["startup"] != "4.87ms" {
		t.Errorf("startup logged as %v, want \"4.87ms\"", line["startup"])
	}
}
