package engine

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestIncidentIsLoggedByItsOriginOnly: every replica hears a
// ChannelIncident notification; only the one whose transaction held the
// instance logs it.
func TestIncidentIsLoggedByItsOriginOnly(t *testing.T) {
	var out bytes.Buffer
	e := &Engine{logger: slog.New(slog.NewTextHandler(&out, nil)), origin: newOrigin()}
	other := newOrigin()
	if other == e.origin {
		t.Fatalf("two origins alike: %s", other)
	}
	id := uuid.New()
	for _, origin := range []string{other, e.origin} {
		payload, _ := json.Marshal(incidentNotice{Origin: origin, Instance: id, Process: "p", Version: 2, Node: "n", Definition: "d", Code: "E"})
		e.Incident(string(payload))
	}
	e.Incident("{not json")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "instance="+id.String()) || !strings.Contains(lines[0], "version=2") ||
		!strings.Contains(lines[1], "unreadable incident notification") {
		t.Fatalf("log:\n%s\nwant one line for this origin's incident, then the unreadable payload", out.String())
	}
}
