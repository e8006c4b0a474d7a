package config

import (
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := Default()
	if c.Listen != "127.0.0.1:8080" || c.DataDir != "./relais-data" {
		t.Errorf("listen, data dir = %q, %q", c.Listen, c.DataDir)
	}
	if c.Pull.DefaultLockDuration != time.Minute || c.Pull.MaxLockDuration != 10*time.Minute {
		t.Errorf("lock durations = %v, %v", c.Pull.DefaultLockDuration, c.Pull.MaxLockDuration)
	}
	if c.Push.DefaultTimeout != 5*time.Second || c.Push.MaxTimeout != 10*time.Second {
		t.Errorf("push = %+v", c.Push)
	}
}

func TestFailsClosedNamingTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"default above ceiling", map[string]string{"RELAIS_PULL_DEFAULT_LOCK_DURATION": "PT20M", "RELAIS_PULL_MAX_LOCK_DURATION": "PT10M"}, nil, "RELAIS_PULL_DEFAULT_LOCK_DURATION"},
		{"zero default", map[string]string{"RELAIS_PULL_DEFAULT_LOCK_DURATION": "PT0S"}, nil, "RELAIS_PULL_DEFAULT_LOCK_DURATION"},
		{"not ISO", map[string]string{"RELAIS_PULL_DEFAULT_LOCK_DURATION": "1 minute"}, nil, "RELAIS_PULL_DEFAULT_LOCK_DURATION"},
		{"zero ceiling", map[string]string{"RELAIS_PULL_MAX_WAIT": "PT0S"}, nil, "RELAIS_PULL_MAX_WAIT"},
		{"lock ceiling under the floor", map[string]string{"RELAIS_PULL_MAX_LOCK_DURATION": "PT0.5S", "RELAIS_PULL_DEFAULT_LOCK_DURATION": "PT0.5S"}, nil,
			"RELAIS_PULL_MAX_LOCK_DURATION (environment): PT0.5S is below the floor of every lock, PT1S"},
		{"default lock under the floor", map[string]string{"RELAIS_PULL_DEFAULT_LOCK_DURATION": "PT0.9S"}, nil, "RELAIS_PULL_DEFAULT_LOCK_DURATION (environment): PT0.9S is below the floor"},
		{"retention too short", map[string]string{"RELAIS_RETENTION": "PT5M"}, nil, "RELAIS_RETENTION"},
		{"retention not a duration", map[string]string{"RELAIS_RETENTION": "never"}, nil, "RELAIS_RETENTION"},
		{"push above hard ceiling", map[string]string{"RELAIS_PUSH_MAX_TIMEOUT": "PT11S"}, nil, "RELAIS_PUSH_MAX_TIMEOUT"},
		{"push ceiling under the floor", map[string]string{"RELAIS_PUSH_MAX_TIMEOUT": "PT0.05S", "RELAIS_PUSH_DEFAULT_TIMEOUT": "PT0.05S"}, nil,
			"RELAIS_PUSH_MAX_TIMEOUT (environment): PT0.05S is below the floor PT0.1S of a push budget"},
		{"push default above", map[string]string{"RELAIS_PUSH_DEFAULT_TIMEOUT": "PT8S", "RELAIS_PUSH_MAX_TIMEOUT": "PT6S"}, nil, "RELAIS_PUSH_DEFAULT_TIMEOUT"},
		{"bad int", map[string]string{"RELAIS_PULL_MAX_TASKS": "ten"}, nil, "RELAIS_PULL_MAX_TASKS"},
		{"negative int", map[string]string{"RELAIS_PULL_MAX_TASKS": "-1"}, nil, "RELAIS_PULL_MAX_TASKS"},
		{"flag overrides env", map[string]string{"RELAIS_PULL_MAX_TASKS": "10"}, []string{"--pull-max-tasks", "0"}, "RELAIS_PULL_MAX_TASKS (flag --pull-max-tasks)"},
		{"short bootstrap token", map[string]string{"RELAIS_BOOTSTRAP_TOKEN": "short"}, nil, "RELAIS_BOOTSTRAP_TOKEN"},
		// No request could present it (SRE QA: a secret file's newline).
		{"bootstrap token ending in a newline", map[string]string{"RELAIS_BOOTSTRAP_TOKEN": "rls_newline_token_abcdefghijkl\n"}, nil, "RELAIS_BOOTSTRAP_TOKEN (environment): ends with white space"},
		{"bootstrap token holding a space", map[string]string{"RELAIS_BOOTSTRAP_TOKEN": "rls_two words_abcdefghijkl"}, nil, "RELAIS_BOOTSTRAP_TOKEN (environment): holds white space"},
		{"keys and a key file", map[string]string{"RELAIS_DATA_KEYS": "k1:AAAA", "RELAIS_DATA_KEY_FILE": "/nonexistent"}, nil, "RELAIS_DATA_KEY_FILE"},
		{"log level", map[string]string{"RELAIS_LOG_LEVEL": "loud"}, nil, "RELAIS_LOG_LEVEL"},
		{"certificate without key", map[string]string{"RELAIS_TLS_CERT_FILE": "/etc/relais/cert.pem"}, nil, "RELAIS_TLS_CERT_FILE (environment) is set without RELAIS_TLS_KEY_FILE"},
		{"key without certificate", map[string]string{"RELAIS_TLS_KEY_FILE": "/etc/relais/key.pem"}, nil, "RELAIS_TLS_KEY_FILE (environment) is set without RELAIS_TLS_CERT_FILE"},
		{"pair that does not load", map[string]string{"RELAIS_TLS_CERT_FILE": "/nonexistent/cert.pem", "RELAIS_TLS_KEY_FILE": "/nonexistent/key.pem"}, nil, "RELAIS_TLS_CERT_FILE (environment), RELAIS_TLS_KEY_FILE (environment)"},
		{"trusted proxies", map[string]string{"RELAIS_TRUSTED_PROXIES": "10.0.0.0/8,10.0.0.0/33"}, nil, "RELAIS_TRUSTED_PROXIES"},
		{"connect timeout", map[string]string{"RELAIS_DATABASE_CONNECT_TIMEOUT": "30s"}, nil, "RELAIS_DATABASE_CONNECT_TIMEOUT"},
		{"timer spinning", map[string]string{"RELAIS_TIMER_INTERVAL": "PT0.0000001S"}, nil, "RELAIS_TIMER_INTERVAL (environment): PT0.0000001S is out of range: from PT0.1S to PT1M"},
		{"timer asleep", map[string]string{"RELAIS_TIMER_INTERVAL": "P1D"}, nil, "RELAIS_TIMER_INTERVAL"},
		{"long polls for days", map[string]string{"RELAIS_PULL_MAX_WAIT": "P100000D"}, nil, "RELAIS_PULL_MAX_WAIT (environment): P100000D is above PT1H"},
		{"a billion tasks a fetch", map[string]string{"RELAIS_PULL_MAX_TASKS": "1000000000"}, nil, "RELAIS_PULL_MAX_TASKS (environment): 1000000000 is above 1000"},
		{"a stream's credit unbounded", map[string]string{"RELAIS_STREAM_MAX_IN_FLIGHT": "5000"}, nil, "RELAIS_STREAM_MAX_IN_FLIGHT (environment): 5000 is above 1000"},
		{"heartbeat flooding", map[string]string{"RELAIS_STREAM_HEARTBEAT": "PT0.01S"}, nil, "RELAIS_STREAM_HEARTBEAT"},
		{"heartbeat missing the dead", map[string]string{"RELAIS_STREAM_HEARTBEAT": "PT1H"}, nil, "RELAIS_STREAM_HEARTBEAT"},
		{"body too small for anything", map[string]string{"RELAIS_MAX_BODY_BYTES": "1"}, nil, "RELAIS_MAX_BODY_BYTES (environment): 1 is out of range"},
		{"body too large to hold", map[string]string{"RELAIS_MAX_BODY_BYTES": "1073741824"}, nil, "RELAIS_MAX_BODY_BYTES"},
		{"a response read of 93 GB", map[string]string{"RELAIS_PUSH_MAX_RESPONSE_BYTES": "99999999999"}, nil, "RELAIS_PUSH_MAX_RESPONSE_BYTES (environment): 99999999999 is out of range: from 1024 to 67108864"},
		// SRE QA: each of these was accepted.
		{"a response read of one byte", map[string]string{"RELAIS_PUSH_MAX_RESPONSE_BYTES": "1"}, nil, "RELAIS_PUSH_MAX_RESPONSE_BYTES (environment): 1 is out of range"},
		{"push calls by the hundred thousand", map[string]string{"RELAIS_PUSH_CONCURRENCY": "100000"}, nil, "RELAIS_PUSH_CONCURRENCY (environment): 100000 is above 1024"},
		{"waiters by the billion", map[string]string{"RELAIS_PULL_MAX_WAITERS": "99999999999"}, nil, "RELAIS_PULL_MAX_WAITERS (environment): 99999999999 is above 100000"},
		{"locks for decades", map[string]string{"RELAIS_PULL_MAX_LOCK_DURATION": "P9999D"}, nil, "RELAIS_PULL_MAX_LOCK_DURATION (environment): P9999D is above P7D"},
		{"retries due in centuries", map[string]string{"RELAIS_PULL_MAX_RETRY_DELAY": "P99999D"}, nil, "RELAIS_PULL_MAX_RETRY_DELAY (environment): P99999D is above P30D"},
		{"a stop drained for a day", map[string]string{"RELAIS_SHUTDOWN_TIMEOUT": "P1D"}, nil, "RELAIS_SHUTDOWN_TIMEOUT (environment): P1D is above PT1H"},
		// A value given as a flag is named with its flag in the checks
		// between settings too, not only where it is parsed.
		{"flag above hard ceiling", nil, []string{"--push-max-timeout", "PT20S"}, "RELAIS_PUSH_MAX_TIMEOUT (flag --push-max-timeout): PT20S is above the hard ceiling PT10S"},
		{"flag out of range", nil, []string{"--stream-heartbeat", "PT0.5S"}, "RELAIS_STREAM_HEARTBEAT (flag --stream-heartbeat): PT0.5S is out of range"},
		{"flag below a default", nil, []string{"--pull-max-retry-delay", "PT5S"}, "RELAIS_PULL_MAX_RETRY_DELAY (flag --pull-max-retry-delay): PT5S is below"},
		{"flag body", nil, []string{"--max-body-bytes", "1000"}, "RELAIS_MAX_BODY_BYTES (flag --max-body-bytes): 1000 is out of range"},
		{"flag certificate without key", nil, []string{"--tls-cert-file", "/x"}, "RELAIS_TLS_CERT_FILE (flag --tls-cert-file) is set without RELAIS_TLS_KEY_FILE"},
		{"flag ceiling below a set default", map[string]string{"RELAIS_PULL_DEFAULT_LOCK_DURATION": "PT5M"}, []string{"--pull-max-lock-duration", "PT2M"}, "RELAIS_PULL_DEFAULT_LOCK_DURATION (environment): PT5M is above its ceiling RELAIS_PULL_MAX_LOCK_DURATION (flag --pull-max-lock-duration) PT2M"},
	}
	for _, tt := range tests {
		_, err := Load("relais serve", tt.args, env(tt.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error = %v; want one naming %s", tt.name, err, tt.want)
		}
	}
}

// TestCeilingBelowADefaultFailsClosed: lowering only a ceiling below a
// default the operator never set, configurable or built into process
// documents, stops the boot with a message naming the ceiling and the
// default, instead of booting and refusing every request or document that
// relies on the default.
func TestCeilingBelowADefaultFailsClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"retry_delay ceiling below the built-in PT10S", map[string]string{"RELAIS_PULL_MAX_RETRY_DELAY": "PT5S"},
			[]string{"RELAIS_PULL_MAX_RETRY_DELAY (environment): PT5S is below the built-in default retry_delay PT10S", "at least PT10S"}},
		{"push ceiling below the default push timeout", map[string]string{"RELAIS_PUSH_MAX_TIMEOUT": "PT3S"},
			[]string{"RELAIS_PUSH_DEFAULT_TIMEOUT: its default PT5S is above its ceiling RELAIS_PUSH_MAX_TIMEOUT (environment) PT3S"}},
		{"lock ceiling below the default lock duration", map[string]string{"RELAIS_PULL_MAX_LOCK_DURATION": "PT30S"},
			[]string{"RELAIS_PULL_DEFAULT_LOCK_DURATION: its default PT1M is above its ceiling RELAIS_PULL_MAX_LOCK_DURATION (environment) PT30S"}},
	}
	for _, tt := range tests {
		_, err := Load("relais serve", nil, env(tt.env), io.Discard)
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error = %v; want one containing %q", tt.name, err, w)
			}
		}
	}
	for _, ok := range []map[string]string{
		{"RELAIS_PULL_MAX_RETRY_DELAY": "PT10S"},
		{"RELAIS_PUSH_MAX_TIMEOUT": "PT5S"},
		{"RELAIS_PULL_MAX_LOCK_DURATION": "PT1M"},
		{"RELAIS_PUSH_MAX_TIMEOUT": "PT3S", "RELAIS_PUSH_DEFAULT_TIMEOUT": "PT2S"},
	} {
		if _, err := Load("relais serve", nil, env(ok), io.Discard); err != nil {
			t.Errorf("%v: %v; want a ceiling equal to its default, or a lowered default, to load", ok, err)
		}
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	if c := Default(); c.Retention != 30*24*time.Hour {
		t.Errorf("default retention %v, want P30D", c.Retention)
	}
	for _, forever := range []string{"forever", "Forever", "FOREVER"} {
		c, err := Load("relais serve", nil, env(map[string]string{"RELAIS_RETENTION": forever}), io.Discard)
		if err != nil || c.Retention != 0 {
			t.Errorf("%s: %v %v, want 0 (keep everything)", forever, c.Retention, err)
		}
	}
	// A month is ISO-8601: the refusal says why it is refused, not that it
	// is no duration.
	_, err := Load("relais serve", nil, env(map[string]string{"RELAIS_RETENTION": "P1M"}), io.Discard)
	if err == nil || strings.Contains(err.Error(), "not an ISO-8601 duration") || !strings.Contains(err.Error(), "use days") {
		t.Errorf("P1M: %v, want a refusal saying to use days", err)
	}
}

func TestFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	c, err := Load("relais serve", []string{"--listen", ":9999"}, env(map[string]string{"RELAIS_LISTEN": ":1", "RELAIS_PULL_MAX_WAIT": "PT30S"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":9999" || c.Pull.MaxWait != 30*time.Second {
		t.Errorf("listen %q, max wait %v", c.Listen, c.Pull.MaxWait)
	}
}

func TestReadmeListsEverySetting(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Settings {
		if !strings.Contains(string(readme), "`"+s.Env+"`") {
			t.Errorf("README.md does not document %s", s.Env)
		}
		if !strings.Contains(string(readme), "`--"+s.Flag+"`") {
			t.Errorf("README.md does not document --%s", s.Flag)
		}
	}
}

// The log format is read case-insensitively, as the log level is.
func TestLogFormatIgnoresCase(t *testing.T) {
	t.Parallel()
	c, err := Load("relais serve", nil, env(map[string]string{"RELAIS_LOG_FORMAT": "JSON", "RELAIS_LOG_LEVEL": "INFO"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.LogFormat != "json" {
		t.Errorf("RELAIS_LOG_FORMAT=JSON read as %q, want json", c.LogFormat)
	}
}

// TestLoadAdminTakesOnlyTheDatabaseSettings: an admin command reads where
// the database is and ignores the server's settings, flags and variables
// alike, even invalid ones, and lists only its own in its help.
func TestLoadAdminTakesOnlyTheDatabaseSettings(t *testing.T) {
	t.Parallel()
	env := map[string]string{"RELAIS_LISTEN": "", "RELAIS_PULL_MAX_TASKS": "lots", "RELAIS_DATABASE_URL": "postgres://h/db"}
	var said strings.Builder
	c, err := LoadAdmin("usage", []string{"--pull-default-lock-duration", "forever", "--data-dir", "/srv/relais"}, func(k string) string { return env[k] }, &said)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(said.String(), "--pull-default-lock-duration is a setting of relais serve, ignored") || strings.Contains(said.String(), "--data-dir") {
		t.Errorf("the ignored flags were announced as %q", said.String())
	}
	if c.DatabaseURL != "postgres://h/db" || c.DataDir != "/srv/relais" || c.Listen != Default().Listen || c.Pull.MaxTasks != Default().Pull.MaxTasks {
		t.Errorf("LoadAdmin = %+v", c)
	}
	var help strings.Builder
	if _, err := LoadAdmin("usage", []string{"-h"}, func(string) string { return "" }, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("help: %v", err)
	}
	if !strings.Contains(help.String(), "-database-url") || strings.Contains(help.String(), "-listen") || strings.Contains(help.String(), "-pull-") {
		t.Errorf("admin help lists:\n%s", help.String())
	}
}

// A RELAIS_ variable that is no setting is said to be ignored, with the
// setting it likely misspells; a misspelling of a setting that is not set
// itself is refused (serve does not start); settings and the variables
// other commands and tooling read are neither.
func TestUnknownVariablesAreNamed(t *testing.T) {
	warnings, refusals := UnknownVariables([]string{"RELAIS_RETENSION=P3D", "RELAIS_RETENTION=P3D", "RELAIS_URL=http://x", "RELAIS_TEST_DATABASE_URL=postgres://", "RELAIS_BROWSER_TESTS=1",
		"PATH=/bin", "RELAIS_COLOUR=blue", "RELAIS_LISTEN=:8080", "RELAIS_DATABASE_URI=postgres://db/relais"}, nil, ServeVariables())
	wantWarnings := []string{
		`RELAIS_COLOUR is not a Relais setting: it is ignored`,
		`RELAIS_RETENSION is not a Relais setting (did you mean "RELAIS_RETENTION"? it is set too): it is ignored`,
	}
	wantRefusals := []string{
		`RELAIS_DATABASE_URI is not a Relais setting (did you mean "RELAIS_DATABASE_URL"?): correct or unset it; the command would otherwise run as if RELAIS_DATABASE_URL were not set`,
	}
	if !slices.Equal(warnings, wantWarnings) || !slices.Equal(refusals, wantRefusals) {
		t.Errorf("UnknownVariables = %q, %q; want %q, %q", warnings, refusals, wantWarnings, wantRefusals)
	}
}

// A misspelt flag is named with the flag it most likely meant, in the one
// error returned: the help is written for -h only, where it would bury the
// error under sixty lines.
func TestMisspeltFlagIsNamed(t *testing.T) {
	var out strings.Builder
	_, err := Load("usage", []string{"--retenton", "P3D"}, func(string) string { return "" }, &out)
	if err == nil || !strings.Contains(err.Error(), "(did you mean --retention?)") {
		t.Errorf("Load(--retenton) = %v; want the flag it meant", err)
	}
	// migrate accepts serve's settings and ignores them: a slip near one
	// is named as such, not as if the flag it meant would apply.
	_, err = LoadAdmin("usage", []string{"--retenton", "P3D"}, func(string) string { return "" }, &out)
	if err == nil || !strings.Contains(err.Error(), "(did you mean --retention? a setting of relais serve, which this command ignores)") {
		t.Errorf("LoadAdmin(--retenton) = %v; want the flag it meant, named as serve's", err)
	}
	_, err = LoadAdmin("usage", []string{"--databse-url", "x"}, func(string) string { return "" }, &out)
	if err == nil || !strings.Contains(err.Error(), "(did you mean --database-url?)") {
		t.Errorf("LoadAdmin(--databse-url) = %v; want the flag it meant", err)
	}
	_, err = Load("usage", []string{"--colour", "blue"}, func(string) string { return "" }, &out)
	if err == nil || strings.Contains(err.Error(), "did you mean") || !strings.Contains(err.Error(), "--help lists the flags") {
		t.Errorf("Load(--colour) = %v; want a refusal without a guess, pointing at --help", err)
	}
	if out.Len() > 0 {
		t.Errorf("a flag error wrote %q; want nothing but the error returned", out.String())
	}
	_, err = Load("usage: relais serve", []string{"-h"}, func(string) string { return "" }, &out)
	if !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out.String(), "usage: relais serve") || !strings.Contains(out.String(), "-retention string") {
		t.Errorf("-h: err %v, output %q; want the help", err, out.String())
	}
}

// A setting given as a flag, or by its alternative, is set: a variable
// misspelling it is only ignored.
func TestMisspellingOfASettingGivenOtherwiseIsIgnored(t *testing.T) {
	environ := []string{"RELAIS_DATABASE_URI=postgres://db/relais", "RELAIS_DATA_KEY=k1:x", "RELAIS_DATA_KEY_FILE=/keys"}
	warnings, refusals := UnknownVariables(environ, []string{"RELAIS_DATABASE_URL"}, ServeVariables())
	if len(refusals) != 0 || len(warnings) != 2 {
		t.Errorf("UnknownVariables = %q, %q; want two warnings and no refusal", warnings, refusals)
	}
	if _, refusals := UnknownVariables(environ, nil, ServeVariables()); len(refusals) != 1 || !strings.Contains(refusals[0], "RELAIS_DATABASE_URI") {
		t.Errorf("without the flag: refusals %q; want RELAIS_DATABASE_URI refused", refusals)
	}
	cfg, err := Load("usage", []string{"--database-url", "postgres://db/relais"}, func(string) string { return "" }, io.Discard)
	if err != nil || !slices.Equal(cfg.Flagged, []string{"RELAIS_DATABASE_URL"}) {
		t.Errorf("Load(--database-url): Flagged %q, %v", cfg.Flagged, err)
	}
}

// Each command refuses a misspelling of a variable it reads, apply's
// RELAIS_URL included, and only warns of one it would ignore anyway.
func TestMisspeltVariableIsRefusedByTheCommandsReadingIt(t *testing.T) {
	environ := []string{"RELAIS_DATABASE_URI=postgres://db/relais", "RELAIS_URI=http://relais.example", "RELAIS_LISTN=:9090"}
	for _, c := range []struct {
		command  string
		reads    []string
		refused  []string
		warnings int
	}{
		{"serve", ServeVariables(), []string{"RELAIS_DATABASE_URI", "RELAIS_LISTN"}, 1},
		{"migrate, token, keys", AdminVariables(), []string{"RELAIS_DATABASE_URI"}, 2},
		{"apply", ApplyVariables(), []string{"RELAIS_URI"}, 2},
	} {
		warnings, refusals := UnknownVariables(environ, nil, c.reads)
		var refused []string
		for _, r := range refusals {
			name, _, _ := strings.Cut(r, " ")
			refused = append(refused, name)
		}
		if !slices.Equal(refused, c.refused) || len(warnings) != c.warnings {
			t.Errorf("%s: UnknownVariables = %q, %q; want %q refused and %d warnings", c.command, warnings, refusals, c.refused, c.warnings)
		}
	}
	_, refusals := UnknownVariables(environ, nil, ApplyVariables())
	if want := `RELAIS_URI is not a Relais setting (did you mean "RELAIS_URL"?): correct or unset it`; len(refusals) != 1 || !strings.HasPrefix(refusals[0], want) {
		t.Errorf("apply: refusals %q; want %q", refusals, want)
	}
}

// RELAIS_DATABASE_URL set but empty (an unset secret in a manifest) is
// refused by the commands that read it: it would run a new, empty
// embedded database as an unset one does.
func TestEmptyDatabaseURLIsRefused(t *testing.T) {
	for _, reads := range [][]string{ServeVariables(), AdminVariables()} {
		_, refusals := UnknownVariables([]string{"RELAIS_DATABASE_URL=", "RELAIS_LISTEN=:8080"}, nil, reads)
		if len(refusals) != 1 || !strings.HasPrefix(refusals[0], "RELAIS_DATABASE_URL is set but empty") {
			t.Errorf("refusals %q; want RELAIS_DATABASE_URL refused as empty", refusals)
		}
	}
	// An empty retention would keep the default 30 days of history.
	if _, refusals := UnknownVariables([]string{"RELAIS_RETENTION= "}, nil, ServeVariables()); len(refusals) != 1 || !strings.HasPrefix(refusals[0], "RELAIS_RETENTION is set but empty") {
		t.Errorf("refusals %q; want RELAIS_RETENTION refused as empty", refusals)
	}
	if _, refusals := UnknownVariables([]string{"RELAIS_DATABASE_URL="}, nil, ApplyVariables()); len(refusals) != 0 {
		t.Errorf("apply, which does not read it: refusals %q", refusals)
	}
	if _, refusals := UnknownVariables([]string{"RELAIS_LISTEN=:8080"}, nil, ServeVariables()); len(refusals) != 0 {
		t.Errorf("unset: refusals %q", refusals)
	}
	if _, refusals := UnknownVariables([]string{"RELAIS_DATABASE_URL="}, []string{"RELAIS_DATABASE_URL"}, ServeVariables()); len(refusals) != 0 {
		t.Errorf("given as a flag too: refusals %q", refusals)
	}
}

// Every variable a command reads is refused set but empty, each refusal
// saying what its default would have done: an unset secret or variable
// in a manifest must not serve cleartext, a new embedded database or
// another port unawares. An empty alternative beside a set one is not.
func TestEmptyVariablesAreRefused(t *testing.T) {
	for _, c := range []struct {
		environ []string
		reads   []string
		want    []string
	}{
		{[]string{"RELAIS_DATA_DIR="}, ServeVariables(), []string{"RELAIS_DATA_DIR is set but empty: give the data folder, or unset the variable for the default ./relais-data (run with it, an empty value would create a new, empty embedded database there)"}},
		{[]string{"RELAIS_TLS_CERT_FILE=", "RELAIS_TLS_KEY_FILE= "}, ServeVariables(), []string{
			"RELAIS_TLS_CERT_FILE is set but empty: give the certificate's file, or unset the variable (and RELAIS_TLS_KEY_FILE) to serve cleartext HTTP",
			"RELAIS_TLS_KEY_FILE is set but empty: give the private key's file, or unset the variable (and RELAIS_TLS_CERT_FILE) to serve cleartext HTTP"}},
		{[]string{"RELAIS_LISTEN="}, ServeVariables(), []string{"RELAIS_LISTEN is set but empty: give it a value, or unset the variable for the default 127.0.0.1:8080"}},
		{[]string{"RELAIS_PULL_MAX_TASKS=", "RELAIS_LOG_LEVEL=info"}, ServeVariables(), []string{"RELAIS_PULL_MAX_TASKS is set but empty: give it a value, or unset the variable for the default 100"}},
		{[]string{"RELAIS_TRUSTED_PROXIES="}, ServeVariables(), []string{"RELAIS_TRUSTED_PROXIES is set but empty: give it a value, or unset the variable to leave it out"}},
		{[]string{"RELAIS_LOG_FORMAT="}, AdminVariables(), []string{"RELAIS_LOG_FORMAT is set but empty: give it a value, or unset the variable for the default text"}},
		{[]string{"RELAIS_URL=", "RELAIS_LISTEN="}, ApplyVariables(), []string{"RELAIS_URL is set but empty: give the server's URL, or unset the variable for the default http://127.0.0.1:8080"}},
		// The key file gives the keys: RELAIS_DATA_KEYS left empty beside
		// it changes nothing.
		{[]string{"RELAIS_DATA_KEYS=", "RELAIS_DATA_KEY_FILE=/run/keys"}, ServeVariables(), nil},
		{[]string{"RELAIS_DATA_KEYS=", "RELAIS_DATA_KEY_FILE="}, AdminVariables(), []string{
			"RELAIS_DATA_KEYS is set but empty: give the data keys, or unset the variable (and give RELAIS_DATA_KEY_FILE, or neither on the embedded cluster, which keeps its own key file)",
			"RELAIS_DATA_KEY_FILE is set but empty: give the key file's path, or unset the variable (and give RELAIS_DATA_KEYS, or neither on the embedded cluster, which keeps its own key file)"}},
		// A duration's default as Relais writes durations back.
		{[]string{"RELAIS_PULL_MAX_WAIT="}, ServeVariables(), []string{"RELAIS_PULL_MAX_WAIT is set but empty: give it a value, or unset the variable for the default PT1M"}},
		{[]string{"RELAIS_TOKEN="}, ApplyVariables(), []string{"RELAIS_TOKEN is set but empty: give the token the command needs (a designer's or an admin's)"}},
		// A command that does not read it.
		{[]string{"RELAIS_LISTEN="}, AdminVariables(), nil},
	} {
		_, refusals := UnknownVariables(c.environ, nil, c.reads)
		if !slices.Equal(refusals, c.want) {
			t.Errorf("%q: refusals\n%q\nwant\n%q", c.environ, refusals, c.want)
		}
	}
	if _, refusals := UnknownVariables([]string{"RELAIS_LISTEN="}, []string{"RELAIS_LISTEN"}, ServeVariables()); len(refusals) != 0 {
		t.Errorf("given as a flag too: refusals %q", refusals)
	}
}
