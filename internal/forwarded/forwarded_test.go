package forwarded

import (
	"crypto/tls"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	trusted, err := ParsePrefixes("10.0.0.0/8, 192.168.1.7")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		peer      string
		tls       bool
		xff, xfp  string
		wantAddr  string
		wantHTTPS bool
	}{
		{"direct", "203.0.113.9:5555", false, "", "", "203.0.113.9", false},
		{"direct TLS", "203.0.113.9:5555", true, "", "", "203.0.113.9", true},
		{"untrusted peer forges both", "203.0.113.9:5555", false, "198.51.100.1", "https", "203.0.113.9", false},
		{"trusted proxy", "10.1.2.3:80", false, "198.51.100.1", "https", "198.51.100.1", true},
		{"trusted bare address", "192.168.1.7:80", false, "198.51.100.1", "https", "198.51.100.1", true},
		{"client-written hops are skipped", "10.1.2.3:80", false, "1.1.1.1, 198.51.100.1, 10.9.9.9", "https", "198.51.100.1", true},
		{"only proxies", "10.1.2.3:80", false, "10.4.4.4", "", "10.4.4.4", false},
		{"garbage hop stops the walk", "10.1.2.3:80", false, "198.51.100.1, nonsense", "", "10.1.2.3", false},
		{"proxy says http over TLS", "10.1.2.3:80", true, "", "http", "10.1.2.3", false},
		{"last proto wins", "10.1.2.3:80", false, "", "http, https", "10.1.2.3", true},
		{"v6 with port", "10.1.2.3:80", false, "[2001:db8::1]:4711", "", "2001:db8::1", false},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		if c.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if c.xfp != "" {
			r.Header.Set("X-Forwarded-Proto", c.xfp)
		}
		got := resolve(r, trusted)
		if got.Addr != netip.MustParseAddr(c.wantAddr) || got.HTTPS != c.wantHTTPS {
			t.Errorf("%s: got %v https=%v; want %s https=%v", c.name, got.Addr, got.HTTPS, c.wantAddr, c.wantHTTPS)
		}
	}
}

func TestParsePrefixes(t *testing.T) {
	t.Parallel()
	// 10.0.0.1/8 is refused: the network or the one proxy? Trusting the
	// network by mistake lets its every client set its own address.
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.0/8,,nope", "10.0.0.1/8"} {
		if _, err := ParsePrefixes(bad); err == nil {
			t.Errorf("ParsePrefixes(%q) accepted", bad)
		}
	}
	ps, err := ParsePrefixes(" 10.0.0.0/8 , ::1 ")
	if err != nil || len(ps) != 2 || ps[0].String() != "10.0.0.0/8" || ps[1].String() != "::1/128" {
		t.Errorf("ParsePrefixes = %v, %v", ps, err)
	}
}
