package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/language"

	"github.com/relais/relais/engine"
)

// Who acted is named with the token's id and role, in each language:
// token names are not unique. An action no token made shows the name.
func TestActorLabel(t *testing.T) {
	id := int64(7)
	a := engine.OperatorAction{ActorName: "night-shift", ActorTokenID: &id, ActorRole: "admin"}
	fr := context.WithValue(context.Background(), localeKey{}, newLocale(language.French))
	for ctx, want := range map[context.Context]string{
		context.Background(): "night-shift (token #7, administrator)",
		fr:                   "night-shift (jeton n°\u00a07, administrateur)",
	} {
		if got := actorLabel(ctx, a); got != want {
			t.Errorf("actorLabel = %q, want %q", got, want)
		}
	}
	if got := actorLabel(context.Background(), engine.OperatorAction{ActorName: "ops-alice"}); got != "ops-alice" {
		t.Errorf("without a token: %q", got)
	}
}

// The code the Camunda facade gives a failure with no retries left is
// explained in each language, as the codes Relais makes are: the worker's
// message alone does not say why the task stopped.
func TestCamundaFailureIsExplained(t *testing.T) {
	fr := context.WithValue(context.Background(), localeKey{}, newLocale(language.French))
	for ctx, want := range map[context.Context]string{
		context.Background(): "A Camunda 7 worker reported a failure with no retries left",
		fr:                   "Un exécutant Camunda 7 a signalé un échec sans nouvelle tentative restante",
	} {
		if got := errorCodeMeaning(ctx, "external_task_failure"); len(got) < len(want) || got[:len(want)] != want {
			t.Errorf("errorCodeMeaning(external_task_failure) = %q, want it to start with %q", got, want)
		}
	}
}

// An open attempt's "so far" agrees with its reservation's "… ago" on the
// same page: at 59.6 s both say 1 min (rounded), not one 59 s and the
// other 1 min.
func TestOpenAttemptAgreesWithItsReservationTime(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	reserved := now.Add(-59600 * time.Millisecond)
	ctx := context.WithValue(context.Background(), prefsKey{}, prefs{utc: true, now: now})
	row := attemptRowOf(ctx, engine.Attempt{Number: 1, ReservedAt: reserved}, false, false, nil)
	if ago := relative(ctx, reserved); row.Duration != "1\u00a0min so far" || ago != "1\u00a0min ago" {
		t.Errorf("open attempt: %q beside %q, want 1 min so far beside 1 min ago", row.Duration, ago)
	}
}

// A deferred attempt settled by another worker, or with its settle token,
// names both the worker that deferred it and who settled it.
func TestDeferredAttemptNamesWhoSettledIt(t *testing.T) {
	fr := context.WithValue(context.Background(), localeKey{}, newLocale(language.French))
	w1, w9, tok := "w1", "w9", "settle-token"
	for _, c := range []struct {
		ctx  context.Context
		a    engine.Attempt
		want string
	}{
		{context.Background(), engine.Attempt{WorkerID: &w1, SettledBy: &w9}, "w1 (deferred; settled by w9)"},
		{context.Background(), engine.Attempt{WorkerID: &w1, SettledBy: &tok, SettledWithToken: true}, "w1 (deferred; settled with its settle token)"},
		{context.Background(), engine.Attempt{WorkerID: &w1, SettledBy: &w9, SettledWithToken: true}, "w1 (deferred; settled with its settle token, as w9)"},
		{fr, engine.Attempt{WorkerID: &w1, SettledBy: &w9}, "w1 (différée\u202f; clôturée par w9)"},
		{context.Background(), engine.Attempt{WorkerID: &w1}, "w1"},
	} {
		if got := attemptRowOf(c.ctx, c.a, false, false, nil).Worker; got != c.want {
			t.Errorf("worker cell %q, want %q", got, c.want)
		}
	}
}

// A duration never wraps inside: its numbers and units are joined by
// no-break spaces ("5 s" above "3 ms" in a squeezed column read as two
// values).
func TestDurationsDoNotWrap(t *testing.T) {
	ctx := context.WithValue(context.Background(), prefsKey{}, prefs{utc: true, now: time.Now()})
	for _, d := range []time.Duration{5*time.Second + 3*time.Millisecond, 90 * time.Second, 2 * time.Hour, 26 * time.Hour} {
		for _, s := range []string{formatDuration(ctx, d), approxDuration(ctx, d)} {
			if strings.Contains(s, " ") || !strings.Contains(s, "\u00a0") {
				t.Errorf("%v reads %q: want its parts joined by no-break spaces", d, s)
			}
		}
	}
}
