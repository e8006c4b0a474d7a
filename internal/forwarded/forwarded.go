// Package forwarded decides who a request comes from and whether it
// arrived over HTTPS, believing X-Forwarded-For and X-Forwarded-Proto only
// from the proxies the operator trusts (RELAIS_TRUSTED_PROXIES). Anyone
// can send those headers; a client that forges them must gain nothing: not
// another address in the logs or the sign-in throttle, not a Secure cookie
// promise over cleartext.
package forwarded

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Client is what a request's origin is believed to be.
type Client struct {
	// Addr is the client's address: the peer's, or the nearest address
	// a chain of trusted proxies reports. It is invalid only when the
	// peer's address cannot be read (a test's fake request).
	Addr netip.Addr
	// HTTPS reports whether the client's request travelled over TLS: to
	// this server directly, or to a trusted proxy that says so.
	HTTPS bool
}

type ctxKey struct{}

// ParsePrefixes reads a comma-separated list of CIDR prefixes or bare
// addresses (a single host). Empty input is no prefix.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return nil, fmt.Errorf("%q is neither a CIDR prefix nor an address", part)
			}
			a = a.Unmap()
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR prefix: %v", part, err)
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		if p != p.Masked() {
			// 10.0.0.1/8: the network 10.0.0.0/8, or the one proxy
			// 10.0.0.1? Trusting the wider one by mistake would let every
			// client of the network set its own address.
			return nil, fmt.Errorf("%q has bits set past its length: write %s for the network or %s for the one address", part, p.Masked(), p.Addr())
		}
		out = append(out, p)
	}
	return out, nil
}

// Middleware records each request's Client for Of, trusting the
// forwarding headers of peers within trusted only.
func Middleware(trusted []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c := resolve(r, trusted)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, c)))
		})
	}
}

// Of returns the request's Client as Middleware resolved it; without the
// middleware, the peer's address and the connection's own TLS state.
func Of(r *http.Request) Client {
	if c, ok := r.Context().Value(ctxKey{}).(Client); ok {
		return c
	}
	return Client{Addr: peer(r), HTTPS: r.TLS != nil}
}

// IsHTTPS reports whether the request's client used HTTPS (see Client).
func IsHTTPS(r *http.Request) bool { return Of(r).HTTPS }

func resolve(r *http.Request, trusted []netip.Prefix) Client {
	c := Client{Addr: peer(r), HTTPS: r.TLS != nil}
	if !c.Addr.IsValid() || !within(c.Addr, trusted) {
		return c
	}
	// The nearest hop that is not a trusted proxy is the client: walking
	// X-Forwarded-For from the right stops at the first address our
	// proxies did not add themselves, so what a client wrote further left
	// is never believed.
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			break
		}
		c.Addr = a
		if !within(a, trusted) {
			break
		}
	}
	// The proxy nearest to us speaks last when a chain appends.
	if protos := r.Header.Values("X-Forwarded-Proto"); len(protos) > 0 {
		list := strings.Split(protos[len(protos)-1], ",")
		switch strings.ToLower(strings.TrimSpace(list[len(list)-1])) {
		case "https":
			c.HTTPS = true
		case "http":
			// The client spoke cleartext to the proxy, even if the
			// proxy re-encrypts to us.
			c.HTTPS = false
		}
	}
	return c
}

func within(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peer is the address of the connection's other end.
func peer(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err == nil {
		return ap.Addr().Unmap()
	}
	a, _ := parseHop(r.RemoteAddr)
	return a
}

// parseHop reads one X-Forwarded-For entry: an address, possibly with a
// port, IPv6 possibly bracketed.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap(), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
