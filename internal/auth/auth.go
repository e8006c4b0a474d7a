// Package auth is the token and role model: tokens are 256-bit random values
// shown once; only their SHA-256 is stored, and the stored hash is compared in
// constant time. It knows nothing of HTTP (internal/httpauth enforces roles
// on routes), so the domain can use it.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relais/relais/internal/fault"
)

// Role is what a token may do. Admin may do everything.
type Role string

// Roles of DESIGN §9.
const (
	RoleAdmin    Role = "admin"
	RoleDesigner Role = "designer"
	RoleOperator Role = "operator"
	RoleConsumer Role = "consumer"
)

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAdmin, RoleDesigner, RoleOperator, RoleConsumer:
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q (admin, designer, operator or consumer)", s)
}

// tokenPrefix makes Relais tokens recognizable to secret scanners.
const tokenPrefix = "rls_"

// SettleTokenPrefix starts a settle token (an occurrence-scoped token a
// front end settles one deferred occurrence with), telling it from staff
// and consumer tokens.
const SettleTokenPrefix = "rlsst_"

// NewToken returns a fresh token and the hash to store.
func NewToken() (token string, hash []byte) {
	var b [32]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program rather than return an error
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, Hash(token)
}

// Hash is the stored form of a token.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Principal is the authenticated caller.
type Principal struct {
	TokenID    int64
	Name       string
	Role       Role
	ConsumerID int64      // zero unless Role is consumer
	ExpiresAt  *time.Time // nil for a token that does not expire
}

// ErrUnknownToken is returned by a Lookup for a token that does not exist,
// was revoked or has expired.
var ErrUnknownToken = errors.New("unknown token")

// Lookup finds the principal of a token hash. It returns the stored hash so
// the middleware can compare it in constant time.
type Lookup func(ctx context.Context, hash []byte) (Principal, []byte, error)

type ctxKey struct{}

// FromContext returns the authenticated principal of a request.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// WithPrincipal returns ctx carrying p (used by the console, whose session
// cookie stands for a token). A note made with WithNote learns p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	if n, ok := ctx.Value(noteKey{}).(*note); ok {
		n.p, n.ok = p, true
	}
	return context.WithValue(ctx, ctxKey{}, p)
}

type noteKey struct{}

type note struct {
	p  Principal
	ok bool
}

// WithNote returns ctx with a note of the principal that the handler it is
// given to authenticates, and its reader: code wrapping that handler (the
// access log) cannot see the context the handler derives. Read it after
// the handler returned.
func WithNote(ctx context.Context) (context.Context, func() (Principal, bool)) {
	n := &note{}
	return context.WithValue(ctx, noteKey{}, n), func() (Principal, bool) { return n.p, n.ok }
}

// Authenticate resolves a token to its principal, or an Unauthorized fault.
func Authenticate(ctx context.Context, lookup Lookup, token string) (Principal, error) {
	if token == "" {
		return Principal{}, fault.New(fault.Unauthorized, "unauthorized", "a bearer token is required")
	}
	want := Hash(token)
	p, stored, err := lookup(ctx, want)
	if errors.Is(err, ErrUnknownToken) && strings.HasPrefix(token, SettleTokenPrefix) {
		// Valid or not, a settle token is no consumer token: saying
		// "unknown" would send its holder to check a token that is fine.
		return Principal{}, fault.New(fault.Unauthorized, "unauthorized",
			"a settle token only completes or fails its own deferred occurrence (POST /api/v1/pull/occurrences/{id}/complete or /fail, or the worker protocol's Complete and Fail): this call needs a consumer's token (the pull and worker protocols) or a staff token (the rest of the API)")
	}
	if errors.Is(err, ErrUnknownToken) {
		return Principal{}, fault.New(fault.Unauthorized, "unauthorized", "the token is unknown, revoked or expired")
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: lookup: %w", err)
	}
	if subtle.ConstantTimeCompare(stored, want) != 1 {
		return Principal{}, fault.New(fault.Unauthorized, "unauthorized", "the token is unknown, revoked or expired")
	}
	return p, nil
}

// Allowed reports whether role is admin or one of roles.
func Allowed(role Role, roles ...Role) bool {
	if role == RoleAdmin {
		return true
	}
	for _, r := range roles {
		if r == role {
			return true
		}
	}
	return false
}
