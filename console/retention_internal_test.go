package console

import (
	"context"
	"testing"
	"time"

	"golang.org/x/text/language"

	"github.com/relais/relais/engine"
)

// Forever applied because another replica keeps everything is said to be
// that replica's, as a longer finite setting is (verifier QA: "kept
// forever (RELAIS_RETENTION)" on a replica configured P30D).
func TestRetentionSaysWhoseSettingApplies(t *testing.T) {
	t.Parallel()
	en := context.WithValue(context.Background(), localeKey{}, newLocale(language.English))
	fr := context.WithValue(context.Background(), localeKey{}, newLocale(language.French))
	month := 30 * 24 * time.Hour
	ended := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	inst := engine.Instance{EndedAt: &ended}
	for _, c := range []struct {
		r          engine.Retention
		line, fact string
	}{
		{engine.Retention{Configured: month, Applied: month}, "Retention: ended instances are deleted with their occurrences 30\u00a0days after they end (RELAIS_RETENTION).", ""},
		{engine.Retention{Configured: month, Applied: 0}, "Retention: ended instances are kept forever, another replica’s RELAIS_RETENTION.", "never: another replica’s RELAIS_RETENTION keeps ended instances forever"},
		{engine.Retention{Configured: 0, Applied: 0}, "Retention: ended instances are kept forever (RELAIS_RETENTION).", "never: retention keeps ended instances forever (RELAIS_RETENTION)"},
	} {
		if got := retentionText(en, c.r, true); got != c.line {
			t.Errorf("%+v: %q, want %q", c.r, got, c.line)
		}
		if fs := retentionFacts(en, inst, c.r, true); c.fact != "" && (len(fs) != 1 || fs[0].Value != c.fact) {
			t.Errorf("%+v: facts %+v, want %q", c.r, fs, c.fact)
		}
	}
	if got := retentionText(fr, engine.Retention{Configured: month}, true); got != "Rétention\u202f: les instances terminées sont conservées sans limite, selon le RELAIS_RETENTION d’une autre réplique." {
		t.Errorf("in French: %q", got)
	}
	if retentionText(en, engine.Retention{}, false) != "" || retentionFacts(en, inst, engine.Retention{}, false) != nil {
		t.Error("something said before the replica noted its retention")
	}
}
