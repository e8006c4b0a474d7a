package camunda

import (
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/relais/relais/internal/auth"
	"github.com/relais/relais/internal/fault"
)

// authenticate admits consumer tokens, given as Authorization: Bearer
// <token> or as HTTP Basic with the consumer's name and its token (what
// Camunda clients' basic-auth interceptors send). Every other caller is
// refused: 401 without valid credentials, 403 with a token of another role.
func (f *Facade) authenticate(lookup auth.Lookup) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := principal(r, lookup)
			if err != nil {
				if fe, ok := fault.As(err); ok && fe.Kind == fault.Unauthorized && r.ProtoMajor == 1 && r.ContentLength != 0 {
					// Refused without its body being read: closing the
					// connection after the answer spares net/http reading
					// what is left of it first (a client that never sends
					// it would hold the answer until the body's deadline).
					w.Header().Set("Connection", "close")
				}
				f.writeError(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		})
	}
}

var errNoCredentials = fault.New(fault.Unauthorized, "unauthorized",
	"the Camunda facade needs a consumer token: Authorization: Bearer <token>, or Basic with the consumer's name and its token")

func principal(r *http.Request, lookup auth.Lookup) (auth.Principal, error) {
	if len(r.Header.Values("Authorization")) > 1 {
		return auth.Principal{}, fault.New(fault.Unauthorized, "unauthorized", "the Authorization header is given more than once: send it once")
	}
	scheme, credentials, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	credentials = strings.TrimSpace(credentials)
	var name, token string
	switch {
	case credentials == "":
		return auth.Principal{}, errNoCredentials
	case strings.EqualFold(scheme, "Bearer"):
		token = credentials
	case strings.EqualFold(scheme, "Basic"):
		raw, err := base64.StdEncoding.DecodeString(credentials)
		if err != nil {
			return auth.Principal{}, fault.New(fault.Unauthorized, "unauthorized", "the Basic credentials are not base64")
		}
		// Split at the last colon: a token has none, a consumer's name may
		// (RFC 7617 forbids a colon in the user-id, but clients send it).
		i := strings.LastIndexByte(string(raw), ':')
		if i < 0 {
			return auth.Principal{}, fault.New(fault.Unauthorized, "unauthorized", "the Basic credentials are not name:token")
		}
		name, token = string(raw[:i]), string(raw[i+1:])
		if token == "" {
			// "<token>:" is a common slip: the token given as the user.
			return auth.Principal{}, fault.New(fault.Unauthorized, "unauthorized",
				"the Basic credentials carry no token: the user is the consumer's name and the password its token (or send Authorization: Bearer <token>)")
		}
	default:
		return auth.Principal{}, errNoCredentials
	}
	p, err := auth.Authenticate(r.Context(), lookup, token)
	if err != nil {
		return auth.Principal{}, err
	}
	if strings.EqualFold(scheme, "Basic") && subtle.ConstantTimeCompare([]byte(name), []byte(p.Name)) != 1 {
		// The name must be the token's consumer: a token alone proves
		// nothing about the name a client shows in logs.
		return auth.Principal{}, fault.New(fault.Unauthorized, "unauthorized", "the name and token do not match")
	}
	if p.Role != auth.RoleConsumer || p.ConsumerID == 0 {
		return auth.Principal{}, fault.New(fault.Forbidden, "forbidden", "the Camunda facade takes consumer tokens only (role %s)", p.Role)
	}
	return p, nil
}
