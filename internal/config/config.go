// Package config reads Relais's configuration from environment variables and
// matching command-line flags, and validates it so that a bad setting stops
// the process at boot (fail closed) instead of surfacing as odd behaviour
// under load.
package config

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/relais/relais/engine/process"
	"github.com/relais/relais/internal/forwarded"
	"github.com/relais/relais/internal/isoduration"
	"github.com/relais/relais/internal/suggest"
)

// Config is the validated configuration of one relais process. Each field
// is one setting of Settings (the README's configuration table says what
// each means and its default); a comment here says what its zero value
// does when that is not "the default".
type Config struct {
	// Flagged lists the settings (by variable) given as flags, which
	// UnknownVariables counts as set.
	Flagged []string
	// DatabaseURL is PostgreSQL's URL; empty runs the embedded cluster
	// of DataDir.
	DatabaseURL string
	// DatabaseConnectTimeout bounds how long a start waits for the
	// database to accept connections before giving up.
	DatabaseConnectTimeout time.Duration
	// Listen is the HTTP listener's address (never empty).
	Listen string
	// TLSCertFile and TLSKeyFile, both set, make the listener speak TLS.
	TLSCertFile string
	TLSKeyFile  string
	// TrustedProxies are the peers whose X-Forwarded-For and
	// X-Forwarded-Proto headers are believed; nil believes nobody.
	TrustedProxies []netip.Prefix
	// DataDir holds the embedded cluster and the generated key file.
	DataDir string
	// BootstrapToken is an admin token ensured at every start; empty
	// prints a generated one on an empty database's first start.
	BootstrapToken string
	// MetricsToken, when set, is the bearer token /metrics requires.
	MetricsToken string
	// PGBin is where initdb and postgres are; empty searches for them.
	PGBin string
	// DataKeys and DataKeyFile (one or the other) hold the data keys;
	// both empty, a key file is generated in DataDir (embedded mode).
	DataKeys    string
	DataKeyFile string
	// MaxBodyBytes bounds every request body.
	MaxBodyBytes int64
	// ShutdownTimeout bounds a graceful stop's drain.
	ShutdownTimeout time.Duration
	// TimerInterval is how often the timers look for lapsed locks,
	// deadlines and due retries.
	TimerInterval time.Duration
	// Retention is how long ended instances are kept; 0 keeps them forever.
	Retention time.Duration
	LogLevel  slog.Level
	// LogFormat is "text" or "json".
	LogFormat string
	Pull      Pull
	Push      Push
	Stream    Stream
}

// Pull holds the operator's bounds on the pull protocol. Requests above a
// ceiling are rejected with bound_exceeded, never clamped.
type Pull struct {
	// DefaultLockDuration is a fetch's lock when it names none.
	DefaultLockDuration time.Duration
	MaxLockDuration     time.Duration
	MaxTasks            int
	MaxWait             time.Duration
	// MaxRetryDelay bounds the retry delay a worker's failure asks for.
	MaxRetryDelay time.Duration
	// MaxWaiters bounds the long polls one replica holds at once.
	MaxWaiters int
}

// Stream holds the bounds of worker streams (DESIGN §10). Requests above a
// ceiling are rejected, never clamped.
type Stream struct {
	// Heartbeat is how often a stream sends a heartbeat; a worker unseen
	// for three is no longer live.
	Heartbeat time.Duration
	// MaxInFlight bounds the credit one stream may grant.
	MaxInFlight int
	// MaxStreams bounds the streams one replica holds at once.
	MaxStreams int
}

// Polling is what the routes that hand out work by polling (the pull
// protocol, the Camunda facade) need of the configuration.
type Polling struct {
	Pull         Pull
	MaxBodyBytes int64
	// Heartbeat is the worker streams' heartbeat: a poller stays live in
	// the worker catalog for its wait plus three of them.
	Heartbeat time.Duration
}

// Polling returns c's settings for the polling routes.
func (c Config) Polling() Polling {
	return Polling{Pull: c.Pull, MaxBodyBytes: c.MaxBodyBytes, Heartbeat: c.Stream.Heartbeat}
}

// Push holds the push runner's budget and capacity.
type Push struct {
	// DefaultTimeout is a call's budget when its destination sets none;
	// MaxTimeout bounds what a destination may set.
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	// Concurrency is how many calls one replica makes at once.
	Concurrency int
	// MaxResponseBytes bounds what a destination's answer may weigh.
	MaxResponseBytes int64
}

type kind int

const (
	kindString kind = iota
	kindSecret
	kindDuration
	kindInt
	kindLevel
	kindFormat
	kindRetention
	kindPrefixes
)

// MinRetention is the shortest retention accepted: history an operator is
// still reading must not vanish under them.
const MinRetention = time.Hour

// Bounds of settings that parse yet would harm a replica outside them.
const (
	MinTimerInterval = 100 * time.Millisecond
	MaxTimerInterval = time.Minute
	MinHeartbeat     = time.Second
	MaxHeartbeat     = 5 * time.Minute
	MinBodyBytes     = 64 << 10
	MaxBodyBytes     = 64 << 20
	MaxPullWait      = time.Hour
	// MaxShutdownTimeout bounds a stop's drain: a day is a typo of PT1M,
	// and an orchestrator kills a replica long before.
	MaxShutdownTimeout = time.Hour
	// MaxTasksCeiling bounds RELAIS_PULL_MAX_TASKS and
	// RELAIS_STREAM_MAX_IN_FLIGHT: as many occurrences at once as a batch
	// settles (engine.MaxBatch; a test keeps them equal).
	MaxTasksCeiling = 1000
	// MinLockDuration is engine.MinLockDuration (a test keeps them equal):
	// a lock ceiling or default under it would refuse every lock a fetch
	// names, or give locks that lapse before a completion arrives.
	MinLockDuration = time.Second
	// MaxLockCeiling bounds RELAIS_PULL_MAX_LOCK_DURATION: a worker that
	// dies holds its task that long (P9999D is a typo; a longer task
	// extends its lock).
	MaxLockCeiling = 7 * 24 * time.Hour
	// MaxRetryDelayCeiling bounds RELAIS_PULL_MAX_RETRY_DELAY: a retry due
	// in years is a typo, never a policy.
	MaxRetryDelayCeiling = 30 * 24 * time.Hour
	// MaxPullWaiters and MaxPushConcurrency bound what one replica holds
	// at once: each waiter a connection, each push call a connection and
	// up to RELAIS_PUSH_MAX_RESPONSE_BYTES of memory.
	MaxPullWaiters     = 100_000
	MaxPushConcurrency = 1024
	// MinPushResponseBytes is the smallest answer limit: below it, every
	// answer with outputs would fail response_too_large.
	MinPushResponseBytes = 1024
)

// Setting describes one configuration key; the README's configuration table
// lists exactly these (a test keeps the two in step).
type Setting struct {
	Env         string
	Flag        string
	Default     string
	Description string
	kind        kind
	set         func(c *Config, v any)
}

// Settings lists every configuration key in the order the README shows them.
var Settings = []Setting{
	{Env: "RELAIS_DATABASE_URL", Flag: "database-url", Description: "PostgreSQL URL; empty runs an embedded cluster in the data directory. A replica's pool holds up to 20 connections (as many as the cores above 20) unless the URL sets pool_max_conns, plus two: its LISTEN connection and its database probe; set but empty, it is refused (unset it for the embedded cluster)", kind: kindSecret,
		set: func(c *Config, v any) { c.DatabaseURL = v.(string) }},
	{Env: "RELAIS_DATABASE_CONNECT_TIMEOUT", Flag: "database-connect-timeout", Default: "PT30S", Description: "how long a start waits for PostgreSQL to accept connections (logging why every 2 s) before exiting", kind: kindDuration,
		set: func(c *Config, v any) { c.DatabaseConnectTimeout = v.(time.Duration) }},
	{Env: "RELAIS_LISTEN", Flag: "listen", Default: "127.0.0.1:8080", Description: "HTTP listen address", kind: kindString,
		set: func(c *Config, v any) { c.Listen = v.(string) }},
	{Env: "RELAIS_TLS_CERT_FILE", Flag: "tls-cert-file", Description: "PEM certificate chain; with RELAIS_TLS_KEY_FILE the listener serves HTTPS (HTTP/2 and HTTP/1.1) and sends HSTS; without both it serves cleartext HTTP/1.1 and h2c", kind: kindString,
		set: func(c *Config, v any) { c.TLSCertFile = v.(string) }},
	{Env: "RELAIS_TLS_KEY_FILE", Flag: "tls-key-file", Description: "PEM private key of RELAIS_TLS_CERT_FILE (both or neither)", kind: kindString,
		set: func(c *Config, v any) { c.TLSKeyFile = v.(string) }},
	{Env: "RELAIS_TRUSTED_PROXIES", Flag: "trusted-proxies", Description: "comma-separated CIDR prefixes (or addresses) of reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed; others' are ignored", kind: kindPrefixes,
		set: func(c *Config, v any) { c.TrustedProxies = v.([]netip.Prefix) }},
	{Env: "RELAIS_DATA_DIR", Flag: "data-dir", Default: "./relais-data", Description: "folder for the embedded cluster and generated key file", kind: kindString,
		set: func(c *Config, v any) { c.DataDir = v.(string) }},
	{Env: "RELAIS_PG_BIN", Flag: "pg-bin", Description: "folder with PostgreSQL's initdb and postgres (embedded mode); empty searches PATH, then the newest /usr/lib/postgresql/*/bin", kind: kindString,
		set: func(c *Config, v any) { c.PGBin = v.(string) }},
	{Env: "RELAIS_BOOTSTRAP_TOKEN", Flag: "bootstrap-token", Description: "admin token ensured at every start (for automation; at least 20 characters, never printed); empty prints a generated one on the first start of an empty database", kind: kindSecret,
		set: func(c *Config, v any) { c.BootstrapToken = v.(string) }},
	{Env: "RELAIS_METRICS_TOKEN", Flag: "metrics-token", Description: "bearer token /metrics requires (at least 20 characters; Prometheus's authorization.credentials or credentials_file); unset: /metrics answers whoever reaches the listener", kind: kindSecret,
		set: func(c *Config, v any) { c.MetricsToken = v.(string) }},
	{Env: "RELAIS_DATA_KEYS", Flag: "data-keys", Description: "keys sealing sensitive and secret values at rest: id:base64-32-bytes[,id:key...], the first one seals (make one with: echo k1:$(head -c32 /dev/urandom | base64))", kind: kindSecret,
		set: func(c *Config, v any) { c.DataKeys = v.(string) }},
	{Env: "RELAIS_DATA_KEY_FILE", Flag: "data-key-file", Description: "file holding the keys (same syntax, one per line; blank lines and lines starting with # are skipped); the embedded default generates DATA_DIR/data-keys (0600)", kind: kindString,
		set: func(c *Config, v any) { c.DataKeyFile = v.(string) }},
	{Env: "RELAIS_PULL_DEFAULT_LOCK_DURATION", Flag: "pull-default-lock-duration", Default: "PT1M", Description: "lock duration when a fetch gives none (at least PT1S)", kind: kindDuration,
		set: func(c *Config, v any) { c.Pull.DefaultLockDuration = v.(time.Duration) }},
	{Env: "RELAIS_PULL_MAX_LOCK_DURATION", Flag: "pull-max-lock-duration", Default: "PT10M", Description: "ceiling of lock_duration (fetch and extend); from PT1S, the floor of every lock, to P7D", kind: kindDuration,
		set: func(c *Config, v any) { c.Pull.MaxLockDuration = v.(time.Duration) }},
	{Env: "RELAIS_PULL_MAX_TASKS", Flag: "pull-max-tasks", Default: "100", Description: "ceiling of max_tasks in one fetch (at most 1000)", kind: kindInt,
		set: func(c *Config, v any) { c.Pull.MaxTasks = v.(int) }},
	{Env: "RELAIS_PULL_MAX_WAIT", Flag: "pull-max-wait", Default: "PT60S", Description: "ceiling of a fetch's long-poll wait, and of a read's wait for an instance to end (GET /api/v1/instances/{id}?wait=) (at most PT1H)", kind: kindDuration,
		set: func(c *Config, v any) { c.Pull.MaxWait = v.(time.Duration) }},
	{Env: "RELAIS_PULL_MAX_RETRY_DELAY", Flag: "pull-max-retry-delay", Default: isoduration.Format(process.DefaultMaxRetryDelay), Description: "ceiling of retry_delay (worker failures and process policies) and of max_retry_delay, the cap of a delay that grows (at least the default retry_delay PT10S, at most P30D)", kind: kindDuration,
		set: func(c *Config, v any) { c.Pull.MaxRetryDelay = v.(time.Duration) }},
	{Env: "RELAIS_PULL_MAX_WAITERS", Flag: "pull-max-waiters", Default: "1000", Description: "long-polling fetches one replica holds at once, and, apart, as many reads waiting for an instance to end (at most 100000); past either 429 too_many_waiters", kind: kindInt,
		set: func(c *Config, v any) { c.Pull.MaxWaiters = v.(int) }},
	{Env: "RELAIS_STREAM_HEARTBEAT", Flag: "stream-heartbeat", Default: "PT10S", Description: "heartbeat interval of worker streams (PT1S to PT5M); a worker unseen for three heartbeats is no longer live", kind: kindDuration,
		set: func(c *Config, v any) { c.Stream.Heartbeat = v.(time.Duration) }},
	{Env: "RELAIS_STREAM_MAX_IN_FLIGHT", Flag: "stream-max-in-flight", Default: "100", Description: "ceiling of a worker stream's max_in_flight (at most 1000)", kind: kindInt,
		set: func(c *Config, v any) { c.Stream.MaxInFlight = v.(int) }},
	{Env: "RELAIS_STREAM_MAX_STREAMS", Flag: "stream-max-streams", Default: "1000", Description: "worker streams one replica holds at once; past it RESOURCE_EXHAUSTED", kind: kindInt,
		set: func(c *Config, v any) { c.Stream.MaxStreams = v.(int) }},
	{Env: "RELAIS_PUSH_DEFAULT_TIMEOUT", Flag: "push-default-timeout", Default: isoduration.Format(process.FallbackPushTimeout), Description: "push budget of a node that gives no timeout (at least PT0.1S)", kind: kindDuration,
		set: func(c *Config, v any) { c.Push.DefaultTimeout = v.(time.Duration) }},
	{Env: "RELAIS_PUSH_MAX_TIMEOUT", Flag: "push-max-timeout", Default: isoduration.Format(process.HardMaxPushTimeout), Description: "ceiling of every push budget (from PT0.1S to PT10S)", kind: kindDuration,
		set: func(c *Config, v any) { c.Push.MaxTimeout = v.(time.Duration) }},
	{Env: "RELAIS_PUSH_CONCURRENCY", Flag: "push-concurrency", Default: "16", Description: "push calls one replica makes at once (at most 1024)", kind: kindInt,
		set: func(c *Config, v any) { c.Push.Concurrency = v.(int) }},
	{Env: "RELAIS_PUSH_MAX_RESPONSE_BYTES", Flag: "push-max-response-bytes", Default: "1048576", Description: "largest destination response read, from 1024 to 67108864", kind: kindInt,
		set: func(c *Config, v any) { c.Push.MaxResponseBytes = int64(v.(int)) }},
	{Env: "RELAIS_MAX_BODY_BYTES", Flag: "max-body-bytes", Default: "1048576", Description: "largest API request body (413 above), from 65536 to 67108864", kind: kindInt,
		set: func(c *Config, v any) { c.MaxBodyBytes = int64(v.(int)) }},
	{Env: "RELAIS_TIMER_INTERVAL", Flag: "timer-interval", Default: "PT1S", Description: "how often a replica looks for deadlines and expired last attempts (PT0.1S to PT1M)", kind: kindDuration,
		set: func(c *Config, v any) { c.TimerInterval = v.(time.Duration) }},
	{Env: "RELAIS_RETENTION", Flag: "retention", Default: "P30D", Description: "how long ended instances (completed, failed, cancelled) are kept with their occurrences and attempts, at least PT1H; forever keeps everything (audit logs are kept regardless)", kind: kindRetention,
		set: func(c *Config, v any) { c.Retention = v.(time.Duration) }},
	{Env: "RELAIS_SHUTDOWN_TIMEOUT", Flag: "shutdown-timeout", Default: "PT30S", Description: "how long a stopping server drains in-flight requests (at most PT1H); worker streams get this less 10s to settle what they hold", kind: kindDuration,
		set: func(c *Config, v any) { c.ShutdownTimeout = v.(time.Duration) }},
	{Env: "RELAIS_LOG_LEVEL", Flag: "log-level", Default: "info", Description: "debug, info, warn or error", kind: kindLevel,
		set: func(c *Config, v any) { c.LogLevel = v.(slog.Level) }},
	{Env: "RELAIS_LOG_FORMAT", Flag: "log-format", Default: "text", Description: "text or json", kind: kindFormat,
		set: func(c *Config, v any) { c.LogFormat = v.(string) }},
}

// tokenProblems are the refusals of a token setting (name, as named)
// given token: too short to be a secret, or holding what no Authorization
// header can carry.
func tokenProblems(name, token string) []string {
	var p []string
	if token != "" && len(token) < 20 {
		p = append(p, name+": must be at least 20 characters")
	}
	if i := strings.IndexFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		// No Authorization header can carry it: the admin it makes could
		// never sign in (SRE QA: a secret file's trailing newline).
		where := "holds"
		if strings.TrimRightFunc(token, unicode.IsSpace) != token {
			where = "ends with"
		}
		p = append(p, name+": "+where+" white space or a control character (a newline left by echo or a secret file?), which no request can present: remove it")
	}
	return p
}

// emptyRefused are the refusals of variables set but empty that say more
// than emptyRefusal's general one: what the default would do there.
var emptyRefused = map[string]string{
	"RELAIS_DATABASE_URL":  "RELAIS_DATABASE_URL is set but empty: give the database's URL, or unset the variable to run the embedded cluster",
	"RELAIS_RETENTION":     "RELAIS_RETENTION is set but empty: give how long ended instances are kept (P30D) or forever, or unset the variable for the default P30D",
	"RELAIS_DATA_DIR":      "RELAIS_DATA_DIR is set but empty: give the data folder, or unset the variable for the default ./relais-data (run with it, an empty value would create a new, empty embedded database there)",
	"RELAIS_TLS_CERT_FILE": "RELAIS_TLS_CERT_FILE is set but empty: give the certificate's file, or unset the variable (and RELAIS_TLS_KEY_FILE) to serve cleartext HTTP",
	"RELAIS_TLS_KEY_FILE":  "RELAIS_TLS_KEY_FILE is set but empty: give the private key's file, or unset the variable (and RELAIS_TLS_CERT_FILE) to serve cleartext HTTP",
	"RELAIS_URL":           "RELAIS_URL is set but empty: give the server's URL, or unset the variable for the default http://127.0.0.1:8080",
	"RELAIS_TOKEN":         "RELAIS_TOKEN is set but empty: give the token the command needs (a designer's or an admin's)",
	"RELAIS_DATA_KEYS":     "RELAIS_DATA_KEYS is set but empty: give the data keys, or unset the variable (and give RELAIS_DATA_KEY_FILE, or neither on the embedded cluster, which keeps its own key file)",
	"RELAIS_DATA_KEY_FILE": "RELAIS_DATA_KEY_FILE is set but empty: give the key file's path, or unset the variable (and give RELAIS_DATA_KEYS, or neither on the embedded cluster, which keeps its own key file)",
}

// emptyRefusal is the refusal of name set but empty.
func emptyRefusal(name string) string {
	if r, ok := emptyRefused[name]; ok {
		return r
	}
	for _, s := range Settings {
		if s.Env == name && s.Default != "" {
			def := s.Default
			if d, err := isoduration.Parse(def); err == nil && s.kind == kindDuration {
				def = isoduration.Format(d) // as Relais writes durations back: PT1M, not PT60S
			}
			return fmt.Sprintf("%s is set but empty: give it a value, or unset the variable for the default %s", name, def)
		}
	}
	return fmt.Sprintf("%s is set but empty: give it a value, or unset the variable to leave it out", name)
}

// Load reads every setting from flags (when given), else the environment,
// else its default, and validates the result. Every problem is reported at
// once, each naming its environment variable. usage heads the flags' help
// (-h), which is written to output and answered with flag.ErrHelp.
func Load(usage string, args []string, getenv func(string) string, output io.Writer) (Config, error) {
	return load(usage, args, getenv, output, func(Setting) bool { return true })
}

// adminSettings are what a command that only opens the database reads
// (migrate, token, keys): where the database is, its data keys, the log.
var adminSettings = []string{"RELAIS_DATABASE_URL", "RELAIS_DATABASE_CONNECT_TIMEOUT", "RELAIS_DATA_DIR", "RELAIS_PG_BIN",
	"RELAIS_DATA_KEYS", "RELAIS_DATA_KEY_FILE", "RELAIS_LOG_LEVEL", "RELAIS_LOG_FORMAT"}

// LoadAdmin is Load for a command that only opens the database: it takes
// (and its help lists) adminSettings alone, every other setting at its
// default, so that a serve-only variable or flag set for the server (say
// an invalid RELAIS_LISTEN) neither shows in its help nor stops it.
func LoadAdmin(usage string, args []string, getenv func(string) string, output io.Writer) (Config, error) {
	return load(usage, args, getenv, output, func(s Setting) bool { return slices.Contains(adminSettings, s.Env) })
}

func load(usage string, args []string, getenv func(string) string, output io.Writer, takes func(Setting) bool) (Config, error) {
	fs := flag.NewFlagSet("relais", flag.ContinueOnError)
	// The flag package writes its error and then the whole help for a
	// flag it does not know: the error, and the flag meant, would scroll
	// past sixty lines of help. The help is written for -h only, and an
	// error is returned once, by the caller.
	fs.SetOutput(io.Discard)
	// The help lists the settings the command takes; the others are
	// accepted and ignored, so that one script may pass the same flags to
	// migrate and to serve.
	shown := flag.NewFlagSet("relais", flag.ContinueOnError)
	shown.SetOutput(output)
	fs.Usage = func() {}
	help := func() {
		fmt.Fprintf(output, "%s\n\nflags (each can also be set by its environment variable):\n", usage)
		shown.PrintDefaults()
	}
	flagValues := make(map[string]*string, len(Settings))
	for _, s := range Settings {
		if !takes(s) {
			fs.String(s.Flag, "", "")
			continue
		}
		help := s.Description + " (env " + s.Env
		if s.Default != "" {
			help += ", default " + s.Default
		}
		flagValues[s.Env] = fs.String(s.Flag, "", help+")")
		shown.String(s.Flag, "", help+")")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help()
			return Config{}, err
		}
		// A misspelt flag is named with the one it most likely meant, as
		// a misspelt variable is.
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
			// The flags this command takes are suggested first: a slip
			// near one of serve's settings, which this command would
			// accept and ignore, is named as such.
			var taken, others []string
			for _, s := range Settings {
				if takes(s) {
					taken = append(taken, s.Flag)
				} else {
					others = append(others, s.Flag)
				}
			}
			name = strings.TrimLeft(name, "-")
			if meant, ok := suggest.Closest(name, taken); ok {
				return Config{}, fmt.Errorf("%w (did you mean --%s?)", err, meant)
			}
			if meant, ok := suggest.Closest(name, others); ok {
				return Config{}, fmt.Errorf("%w (did you mean --%s? a setting of relais serve, which this command ignores)", err, meant)
			}
		}
		return Config{}, fmt.Errorf("%w (--help lists the flags)", err)
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, s := range Settings {
		if given[s.Flag] && !takes(s) {
			// Said, so that nobody believes it applied here.
			fmt.Fprintf(output, "note: --%s is a setting of relais serve, ignored by this command\n", s.Flag)
		}
	}

	var c Config
	for _, st := range Settings {
		if given[st.Flag] {
			c.Flagged = append(c.Flagged, st.Env)
		}
	}
	var problems []string
	sources := map[string]string{}
	for _, s := range Settings {
		raw, from := s.Default, "default"
		if v := getenv(s.Env); v != "" && takes(s) {
			raw, from = v, "environment"
		}
		if given[s.Flag] && takes(s) {
			raw, from = *flagValues[s.Env], "flag --"+s.Flag
		}
		sources[s.Env] = from
		v, err := parseValue(s, raw)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s (%s): %v", s.Env, from, err))
			continue
		}
		s.set(&c, v)
	}
	if len(problems) == 0 {
		problems = c.check(sources)
	}
	if len(problems) > 0 {
		return Config{}, &Error{Problems: problems}
	}
	return c, nil
}

// Error lists every configuration problem found.
type Error struct{ Problems []string }

func (e *Error) Error() string {
	return "invalid configuration:\n  " + strings.Join(e.Problems, "\n  ")
}

func parseValue(s Setting, raw string) (any, error) {
	switch s.kind {
	case kindDuration:
		d, err := isoduration.Parse(raw)
		if err != nil {
			return nil, err
		}
		if d <= 0 {
			return nil, errors.New("must be above zero")
		}
		return d, nil
	case kindInt:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", raw)
		}
		if n <= 0 {
			return nil, errors.New("must be above zero")
		}
		return n, nil
	case kindLevel:
		var l slog.Level
		if err := l.UnmarshalText([]byte(raw)); err != nil {
			return nil, fmt.Errorf("%q is not one of debug, info, warn, error", raw)
		}
		return l, nil
	case kindRetention:
		// Case-insensitive, as the log level is.
		if strings.EqualFold(raw, "forever") {
			return time.Duration(0), nil
		}
		d, err := isoduration.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%w; or forever, to keep everything", err)
		}
		if d < MinRetention {
			return nil, fmt.Errorf("must be at least %s, or forever to keep everything", isoduration.Format(MinRetention))
		}
		return d, nil
	case kindPrefixes:
		return forwarded.ParsePrefixes(raw)
	case kindFormat:
		// Case-insensitive, as the log level is.
		format := strings.ToLower(raw)
		if format != "text" && format != "json" {
			return nil, fmt.Errorf("%q is not text or json", raw)
		}
		return format, nil
	default:
		return raw, nil
	}
}

// Named is a setting as a message names it: its variable, with the flag
// it was given by when it was ("RELAIS_LISTEN (flag --listen)"), as a
// refusal of its value says it; the variable alone would send an operator
// who gave a flag through an environment they never touched.
func (c Config) Named(env string) string {
	if !slices.Contains(c.Flagged, env) {
		return env
	}
	for _, s := range Settings {
		if s.Env == env {
			return env + " (flag --" + s.Flag + ")"
		}
	}
	return env
}

// check validates relations between settings. sources says where each
// setting's value came from ("default", "environment", "flag --x"), so that
// a message names the flag a value was given with, as parseValue's do, and
// can say the operator lowered a ceiling below a default they never set.
//
// Every default is checked against its ceiling, the configurable ones and
// the built-in ones of process documents alike: a default above its
// ceiling would let the server boot and then refuse every request or
// document relying on it, pointing at a field its author never wrote.
func (c Config) check(sources map[string]string) []string {
	var p []string
	// named is a setting as a message names it: with where it was given,
	// as parseValue's refusals say it (the variable alone would send the
	// operator given a flag looking through an environment they never
	// touched). A default is named bare: the operator set nothing.
	named := func(env string) string {
		if from := sources[env]; from != "" && from != "default" {
			return env + " (" + from + ")"
		}
		return env
	}
	aboveCeiling := func(env string, v time.Duration, ceilingEnv string, ceiling time.Duration) {
		if sources[env] == "default" {
			p = append(p, fmt.Sprintf("%s: its default %s is above its ceiling %s %s; set %s at most %s too, or raise %s",
				env, isoduration.Format(v), named(ceilingEnv), isoduration.Format(ceiling), env, isoduration.Format(ceiling), ceilingEnv))
			return
		}
		p = append(p, fmt.Sprintf("%s: %s is above its ceiling %s %s", named(env), isoduration.Format(v), named(ceilingEnv), isoduration.Format(ceiling)))
	}
	for _, l := range []struct {
		env string
		v   time.Duration
	}{{"RELAIS_PULL_DEFAULT_LOCK_DURATION", c.Pull.DefaultLockDuration}, {"RELAIS_PULL_MAX_LOCK_DURATION", c.Pull.MaxLockDuration}} {
		if l.v < MinLockDuration {
			p = append(p, fmt.Sprintf("%s: %s is below the floor of every lock, %s (a shorter lock lapses before a completion can arrive)",
				named(l.env), isoduration.Format(l.v), isoduration.Format(MinLockDuration)))
		}
	}
	if c.Pull.DefaultLockDuration > c.Pull.MaxLockDuration && c.Pull.MaxLockDuration >= MinLockDuration {
		// (A ceiling under the floor is refused above, in words of its
		// own: lowering the default to it would not do.)
		aboveCeiling("RELAIS_PULL_DEFAULT_LOCK_DURATION", c.Pull.DefaultLockDuration, "RELAIS_PULL_MAX_LOCK_DURATION", c.Pull.MaxLockDuration)
	}
	// A pull node without retry_delay gets process.DefaultRetryDelay
	// (frozen into its document), which publish checks against this
	// ceiling like a written one.
	if c.Pull.MaxRetryDelay < process.DefaultRetryDelay {
		p = append(p, fmt.Sprintf("%s: %s is below the built-in default retry_delay %s of pull nodes that give none, so every such process would be refused at publish; set it to at least %s",
			named("RELAIS_PULL_MAX_RETRY_DELAY"), isoduration.Format(c.Pull.MaxRetryDelay), isoduration.Format(process.DefaultRetryDelay), isoduration.Format(process.DefaultRetryDelay)))
	}
	if c.Push.MaxTimeout > process.HardMaxPushTimeout {
		p = append(p, fmt.Sprintf("%s: %s is above the hard ceiling %s", named("RELAIS_PUSH_MAX_TIMEOUT"), isoduration.Format(c.Push.MaxTimeout), isoduration.Format(process.HardMaxPushTimeout)))
	}
	for _, d := range []struct {
		env string
		v   time.Duration
	}{{"RELAIS_PUSH_DEFAULT_TIMEOUT", c.Push.DefaultTimeout}, {"RELAIS_PUSH_MAX_TIMEOUT", c.Push.MaxTimeout}} {
		if d.v < process.MinPushTimeout {
			p = append(p, fmt.Sprintf("%s: %s is below the floor %s of a push budget", named(d.env), isoduration.Format(d.v), isoduration.Format(process.MinPushTimeout)))
		}
	}
	if c.Push.DefaultTimeout > c.Push.MaxTimeout && c.Push.MaxTimeout >= process.MinPushTimeout {
		// (A ceiling under the floor is refused above: lowering the
		// default to it would not do.)
		aboveCeiling("RELAIS_PUSH_DEFAULT_TIMEOUT", c.Push.DefaultTimeout, "RELAIS_PUSH_MAX_TIMEOUT", c.Push.MaxTimeout)
	}
	// Values that parse yet would harm the replica or its users: a timer
	// spinning PostgreSQL at full speed or checking deadlines once a day,
	// heartbeats flooding streams or missing dead ones for an hour, bodies
	// so small that no definition fits.
	within := func(env string, v, lo, hi time.Duration) {
		if v < lo || v > hi {
			p = append(p, fmt.Sprintf("%s: %s is out of range: from %s to %s", named(env), isoduration.Format(v), isoduration.Format(lo), isoduration.Format(hi)))
		}
	}
	atMost := func(env string, v, most time.Duration, why string) {
		if v > most {
			p = append(p, fmt.Sprintf("%s: %s is above %s%s", named(env), isoduration.Format(v), isoduration.Format(most), why))
		}
	}
	// A long poll held past a proxy's idle timeout is cut by it; one held
	// for days is a typo of PT100S.
	atMost("RELAIS_PULL_MAX_WAIT", c.Pull.MaxWait, MaxPullWait, "")
	atMost("RELAIS_PULL_MAX_LOCK_DURATION", c.Pull.MaxLockDuration, MaxLockCeiling, " (a worker that dies holds its task that long; a longer task extends its lock)")
	atMost("RELAIS_PULL_MAX_RETRY_DELAY", c.Pull.MaxRetryDelay, MaxRetryDelayCeiling, "")
	atMost("RELAIS_SHUTDOWN_TIMEOUT", c.ShutdownTimeout, MaxShutdownTimeout, "")
	for _, n := range []struct {
		env     string
		v, most int
	}{
		// As many occurrences claimed at once as a batch settles.
		{"RELAIS_PULL_MAX_TASKS", c.Pull.MaxTasks, MaxTasksCeiling}, {"RELAIS_STREAM_MAX_IN_FLIGHT", c.Stream.MaxInFlight, MaxTasksCeiling},
		{"RELAIS_PUSH_CONCURRENCY", c.Push.Concurrency, MaxPushConcurrency}, {"RELAIS_PULL_MAX_WAITERS", c.Pull.MaxWaiters, MaxPullWaiters},
	} {
		if n.v > n.most {
			p = append(p, fmt.Sprintf("%s: %d is above %d", named(n.env), n.v, n.most))
		}
	}
	within("RELAIS_TIMER_INTERVAL", c.TimerInterval, MinTimerInterval, MaxTimerInterval)
	within("RELAIS_STREAM_HEARTBEAT", c.Stream.Heartbeat, MinHeartbeat, MaxHeartbeat)
	if c.MaxBodyBytes < MinBodyBytes || c.MaxBodyBytes > MaxBodyBytes {
		p = append(p, fmt.Sprintf("%s: %d is out of range: from %d to %d", named("RELAIS_MAX_BODY_BYTES"), c.MaxBodyBytes, MinBodyBytes, MaxBodyBytes))
	}
	if c.Push.MaxResponseBytes > MaxBodyBytes || c.Push.MaxResponseBytes < MinPushResponseBytes {
		// Read whole into memory by each of the push calls at once; too
		// small, it fails every answer.
		p = append(p, fmt.Sprintf("%s: %d is out of range: from %d to %d", named("RELAIS_PUSH_MAX_RESPONSE_BYTES"), c.Push.MaxResponseBytes, MinPushResponseBytes, int64(MaxBodyBytes)))
	}
	p = append(p, tokenProblems(named("RELAIS_BOOTSTRAP_TOKEN"), c.BootstrapToken)...)
	p = append(p, tokenProblems(named("RELAIS_METRICS_TOKEN"), c.MetricsToken)...)
	switch {
	case (c.TLSCertFile == "") != (c.TLSKeyFile == ""):
		set, missing := "RELAIS_TLS_CERT_FILE", "RELAIS_TLS_KEY_FILE"
		if c.TLSCertFile == "" {
			set, missing = missing, set
		}
		p = append(p, fmt.Sprintf("%s is set without %s: set both (a certificate and its key) or neither", named(set), missing))
	case c.TLSCertFile != "":
		if _, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile); err != nil {
			p = append(p, named("RELAIS_TLS_CERT_FILE")+", "+named("RELAIS_TLS_KEY_FILE")+": "+err.Error())
		}
	}
	if c.DataKeys != "" && c.DataKeyFile != "" {
		// One would be ignored, and with it perhaps the key that opens
		// what the other never sealed.
		p = append(p, named("RELAIS_DATA_KEYS")+", "+named("RELAIS_DATA_KEY_FILE")+": set one or the other, not both")
	}
	if c.Listen == "" {
		p = append(p, named("RELAIS_LISTEN")+": must not be empty")
	}
	if c.DatabaseURL == "" && c.DataDir == "" {
		p = append(p, named("RELAIS_DATA_DIR")+": must not be empty without RELAIS_DATABASE_URL")
	}
	return p
}

// Default returns the configuration with every default, as Load gives with
// an empty environment. Tests start from it.
func Default() Config {
	c, err := Load("", nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		panic("config: defaults do not validate: " + err.Error())
	}
	return c
}

// applyVariables are what relais apply reads (the examples' workers read
// them too); otherVariables, the RELAIS_ variables that are not settings
// of the server but are read by its other commands and clients;
// otherPrefixes, those of its test and bench tooling.
var (
	applyVariables = []string{"RELAIS_URL", "RELAIS_TOKEN"}
	otherVariables = append(slices.Clone(applyVariables), "RELAIS_WORKER_PROTOCOL")
	// alternatives are settings that give the same thing two ways.
	alternatives  = map[string]string{"RELAIS_DATA_KEYS": "RELAIS_DATA_KEY_FILE"}
	otherPrefixes = []string{"RELAIS_TEST_", "RELAIS_BENCH_", "RELAIS_BROWSER_", "RELAIS_OPENAPI_", "RELAIS_SKIP_"}
)

// alternativeOf is the setting that gives what name gives another way,
// or "".
func alternativeOf(name string) string {
	for a, b := range alternatives {
		switch name {
		case a:
			return b
		case b:
			return a
		}
	}
	return ""
}

// ServeVariables lists what relais serve reads: every setting.
func ServeVariables() []string {
	names := make([]string, len(Settings))
	for i, s := range Settings {
		names[i] = s.Env
	}
	return names
}

// AdminVariables lists what a command that only opens the database reads
// (LoadAdmin's settings).
func AdminVariables() []string { return slices.Clone(adminSettings) }

// ApplyVariables lists what relais apply reads.
func ApplyVariables() []string { return slices.Clone(applyVariables) }

// UnknownVariables says, for each RELAIS_ variable of environ (as
// os.Environ lists them) that no command reads, that it is ignored, with
// the variable it most likely misspells: a typo would otherwise leave the
// default in force without a word. A misspelling of a variable the command
// reads (reads: ServeVariables, AdminVariables or ApplyVariables) that is
// not set itself is a refusal rather than a warning: the command does not
// run, since the default it would run with may be far from what was meant
// (a misspelt RELAIS_DATABASE_URL would serve, or create a token in, a
// new, empty embedded database). A misspelling of a variable the command
// ignores anyway is only a warning.
//
// flagged lists the settings given as flags, set as much as a variable.
// A setting one of whose alternatives is set (RELAIS_DATA_KEY_FILE for
// RELAIS_DATA_KEYS) counts as set too.
func UnknownVariables(environ, flagged, reads []string) (warnings, refusals []string) {
	// Every command's variables are candidates, so that a misspelt
	// RELAIS_URL is named as such whichever command meets it.
	names := append(ServeVariables(), otherVariables...)
	set := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		set[name] = true
	}
	for _, name := range flagged {
		set[name] = true
	}
	for a, b := range alternatives {
		if set[a] || set[b] {
			set[a], set[b] = true, true
		}
	}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "RELAIS_") || slices.Contains(names, name) ||
			slices.ContainsFunc(otherPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		meant, ok := suggest.Closest(name, names)
		switch {
		case !ok:
			warnings = append(warnings, fmt.Sprintf("%s is not a Relais setting: it is ignored", name))
		case set[meant]:
			warnings = append(warnings, fmt.Sprintf("%s is not a Relais setting (did you mean %q? it is set too): it is ignored", name, meant))
		case !slices.Contains(reads, meant):
			warnings = append(warnings, fmt.Sprintf("%s is not a Relais setting (did you mean %q? this command does not read it either): it is ignored", name, meant))
		default:
			refusals = append(refusals, fmt.Sprintf("%s is not a Relais setting (did you mean %q?): correct or unset it; the command would otherwise run as if %s were not set", name, meant, meant))
		}
	}
	values := map[string]string{}
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		values[name] = v
	}
	for _, kv := range environ {
		// Set and empty, it would run as unset does: an unset secret or
		// variable in a unit file or a manifest, most likely, whose
		// default is not one to fall into unawares (a new embedded
		// database, cleartext HTTP, history deleted after 30 days, the
		// listener another service may hold). One of two alternatives
		// left empty beside the other set is not refused: the other
		// gives the setting.
		name, v, _ := strings.Cut(kv, "=")
		if strings.TrimSpace(v) != "" || !slices.Contains(reads, name) || slices.Contains(flagged, name) {
			continue
		}
		if other := alternativeOf(name); other != "" && (strings.TrimSpace(values[other]) != "" || slices.Contains(flagged, other)) {
			continue
		}
		refusals = append(refusals, emptyRefusal(name))
	}
	slices.Sort(warnings)
	slices.Sort(refusals)
	return warnings, refusals
}
