package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/testlog"
)

// TestBootstrapLogsAndWarns: a token Bootstrap creates is logged as any
// other creation; a new RELAIS_BOOTSTRAP_TOKEN beside an older bootstrap
// admin token still valid (a rotation that left the leaked token working)
// is warned about with the older token's id, as is a revoked one, which
// will not authenticate; nothing is revoked.
func TestBootstrapLogsAndWarns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs testlog.Buffer
	e := New(dbtest.Pool(t), Options{Keys: testRing(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	bootstrap := func(given string) (created, logged string) {
		t.Helper()
		before := len(logs.String())
		created, err := e.Bootstrap(ctx, given)
		if err != nil {
			t.Fatalf("Bootstrap: %v", err)
		}
		return created, logs.String()[before:]
	}
	// ids lists the usable tokens' ids, oldest first.
	ids := func() []int64 {
		t.Helper()
		tokens, err := e.ListStaffTokens(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, tk := range tokens {
			out = append(out, tk.ID)
		}
		return out
	}

	generated, logged := bootstrap("")
	first := ids()[0]
	if generated == "" || !strings.Contains(logged, fmt.Sprintf(`msg="access changed" event=token.created actor=system actor_token_id=0 actor_role="" token_id=%d name=bootstrap role=admin`, first)) {
		t.Errorf("the generated token (%d): log\n%s\nwant its token.created", first, logged)
	}

	leaked := "leaked-bootstrap-token-0123456789"
	if _, logged = bootstrap(leaked); !strings.Contains(logged, "event=token.created") || !strings.Contains(logged, fmt.Sprintf("older bootstrap admin token(s) %d still authenticate", first)) {
		t.Errorf("a given token beside the generated one: log\n%s\nwant its token.created and a warning naming %d", logged, first)
	}
	second := ids()[1]
	if _, logged = bootstrap(leaked); logged != "" {
		t.Errorf("the same given token again: log\n%s\nwant nothing", logged)
	}

	rotated := "rotated-bootstrap-token-0123456789"
	_, logged = bootstrap(rotated)
	want := fmt.Sprintf(`level=WARN msg="RELAIS_BOOTSTRAP_TOKEN is new: it created admin token %d, and the older bootstrap admin token(s) %d, %d still authenticate; if the new value replaces a leaked one, revoke them (relais token revoke ID, or DELETE /api/v1/tokens/ID)"`, ids()[2], first, second)
	if !strings.Contains(logged, want) || !strings.Contains(logged, fmt.Sprintf("token_id=%d name=bootstrap", ids()[2])) {
		t.Errorf("a rotated given token: log\n%s\nwant its token.created and %s", logged, want)
	}
	if n := len(ids()); n != 3 {
		t.Errorf("%d tokens usable after the rotation; want 3 (nothing revoked)", n)
	}

	if err := e.RevokeStaffToken(ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, logged = bootstrap(leaked); !strings.Contains(logged, `level=WARN msg="RELAIS_BOOTSTRAP_TOKEN is revoked: it will not authenticate`) || strings.Contains(logged, "token.created") {
		t.Errorf("a revoked given token: log\n%s\nwant a warning that it is revoked, and nothing created", logged)
	}

	// A token made elsewhere and given as the bootstrap one once expired.
	ci, _, err := e.CreateToken(ctx, "ci", auth.RoleAdmin, Expiry{In: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	e.now = func() time.Time { return later }
	if _, logged = bootstrap(ci); !strings.Contains(logged, `level=WARN msg="RELAIS_BOOTSTRAP_TOKEN is expired: it will not authenticate`) {
		t.Errorf("an expired given token: log\n%s\nwant a warning that it expired", logged)
	}
}
