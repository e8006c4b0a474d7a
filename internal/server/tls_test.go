package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relais/relais/internal/config"
	"github.com/relais/relais/internal/relaistest"
	"github.com/relais/relais/internal/server"
	"github.com/relais/relais/internal/testlog"
)

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files
// and returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	return certFile, keyFile, writeSelfSigned(t, certFile, keyFile, 1)
}

// writeSelfSigned writes a certificate for 127.0.0.1 with serial and its
// key to the files named, and returns a pool that trusts it.
func writeSelfSigned(t *testing.T, certFile, keyFile string, serial int64) (roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "relais test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return roots
}

// serve serves env's handler with the server relais serve builds from
// env's configuration and returns its base URL.
func serve(t *testing.T, env *relaistest.Env) string {
	t.Helper()
	srv, _, err := server.NewHTTPServer(env.Config, env.Handler, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http"
	if env.Config.TLSCertFile != "" {
		scheme = "https"
	}
	go func() { _ = server.Serve(srv, ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return scheme + "://" + ln.Addr().String()
}

// consoleCookies signs in to the console through client, as a browser
// does, and returns every cookie the server set on the way, by name: the
// sign-in form's CSRF cookie, the session cookie and the language cookie.
func consoleCookies(t *testing.T, client *http.Client, base, token string, headers map[string]string) map[string]*http.Cookie {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := *client
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	got := map[string]*http.Cookie{}
	do := func(method, path string, form url.Values) {
		var body *strings.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		} else {
			body = strings.NewReader("")
		}
		req, _ := http.NewRequest(method, base+path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		for _, ck := range res.Cookies() {
			if ck.MaxAge >= 0 {
				got[ck.Name] = ck
			}
		}
	}
	do("GET", "/console/sign-in", nil)
	csrf := got["relais_sign_in"]
	if csrf == nil {
		t.Fatal("the sign-in page set no CSRF cookie")
	}
	do("POST", "/console/sign-in", url.Values{"csrf": {csrf.Value}, "token": {token}})
	do("GET", "/console/lang/fr", nil)
	for _, name := range []string{"relais_sign_in", "relais_session", "lang"} {
		if got[name] == nil {
			t.Fatalf("no %s cookie was set; got %v", name, got)
		}
	}
	return got
}

func checkSecure(t *testing.T, what string, cookies map[string]*http.Cookie, want bool) {
	t.Helper()
	for name, ck := range cookies {
		if ck.Secure != want || !ck.HttpOnly {
			t.Errorf("%s: cookie %s Secure=%v HttpOnly=%v; want Secure=%v HttpOnly", what, name, ck.Secure, ck.HttpOnly, want)
		}
	}
}

// TestTLSServesHTTP2 serves the replica with a certificate: clients get
// HTTP/2 (or HTTP/1.1 if that is all they speak), an HSTS header, and
// Secure console cookies on every route that sets one.
func TestTLSServesHTTP2(t *testing.T) {
	t.Parallel()
	certFile, keyFile, roots := selfSigned(t)
	env := relaistest.New(t, func(c *config.Config) { c.TLSCertFile, c.TLSKeyFile = certFile, keyFile })
	base := serve(t, env)

	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	res, err := h2.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != 200 {
		t.Errorf("GET /healthz over TLS: %s %d; want HTTP/2 200", res.Proto, res.StatusCode)
	}
	if hsts := res.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(hsts, "max-age=") {
		t.Errorf("Strict-Transport-Security = %q over TLS; want max-age", hsts)
	}

	h1 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	req, _ := http.NewRequest("GET", base+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+env.Admin)
	res, err = h1.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.ProtoMajor != 1 || res.StatusCode != 200 {
		t.Errorf("GET /api/v1/whoami over TLS with HTTP/1.1: %s %d; want HTTP/1.1 200", res.Proto, res.StatusCode)
	}

	checkSecure(t, "over TLS", consoleCookies(t, h2, base, env.Operator, nil), true)
}

// TestRenewedCertificateIsServed: Reload takes the files' new certificate
// for the next connections, says when nothing changed, and keeps serving
// the current one when the files do not load (a renewal half written).
func TestRenewedCertificateIsServed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, certFile, keyFile, 1)
	var logs testlog.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, cert, err := server.NewHTTPServer(config.Config{TLSCertFile: certFile, TLSKeyFile: keyFile},
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }), logger)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.Serve(srv, ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	served := func() string {
		t.Helper()
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := served(); got != "1" || cert.Serial() != "1" {
		t.Fatalf("serial %s served (%s said), want 1", got, cert.Serial())
	}
	// Plain HTTP to the TLS port (a peer's mistake): net/http's complaint
	// is a structured record at debug level, not a line of its own.
	if res, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil {
		res.Body.Close()
	}
	relaistest.WaitFor(t, 5*time.Second, "the handshake error logged", func() (bool, string) {
		out := logs.String()
		return strings.Contains(out, `"level":"DEBUG","msg":"http server: http: TLS handshake error`), out
	})

	writeSelfSigned(t, certFile, keyFile, 2)
	if changed, err := cert.Reload(); err != nil || !changed {
		t.Fatalf("Reload after a renewal = %v, %v; want a change", changed, err)
	}
	if got := served(); got != "2" {
		t.Errorf("after the reload: serial %s served, want 2", got)
	}
	if changed, err := cert.Reload(); err != nil || changed {
		t.Errorf("Reload of unchanged files = %v, %v; want no change", changed, err)
	}

	if err := os.WriteFile(keyFile, []byte("-----BEGIN PRIVATE KEY-----\nhalf"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Reload(); err == nil {
		t.Error("Reload of a broken key succeeded")
	}
	if got := served(); got != "2" {
		t.Errorf("after a failed reload: serial %s served, want 2 still", got)
	}
	if time.Until(cert.NotAfter()) < 50*time.Minute {
		t.Errorf("NotAfter %v, want the served certificate's (an hour from now)", cert.NotAfter())
	}
}

// TestCleartextServesHTTP1AndH2C: without a certificate the same listener
// speaks HTTP/1.1 and HTTP/2 with prior knowledge (h2c, what gRPC clients
// use without TLS), sends no HSTS, and sets no Secure cookie.
func TestCleartextServesHTTP1AndH2C(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	base := serve(t, env)

	h2c := &http.Client{Transport: &http.Transport{Protocols: new(http.Protocols)}}
	h2c.Transport.(*http.Transport).Protocols.SetUnencryptedHTTP2(true)
	for _, c := range []struct {
		client *http.Client
		major  int
	}{{http.DefaultClient, 1}, {h2c, 2}} {
		res, err := c.client.Get(base + "/healthz")
		if err != nil {
			t.Fatalf("HTTP/%d: %v", c.major, err)
		}
		res.Body.Close()
		if res.ProtoMajor != c.major || res.StatusCode != 200 {
			t.Errorf("GET /healthz: %s %d; want HTTP/%d 200", res.Proto, res.StatusCode, c.major)
		}
		if hsts := res.Header.Get("Strict-Transport-Security"); hsts != "" {
			t.Errorf("Strict-Transport-Security = %q over cleartext; want none", hsts)
		}
	}
	checkSecure(t, "over cleartext", consoleCookies(t, http.DefaultClient, base, env.Operator, nil), false)
}

// TestForwardedHeadersOnlyFromTrustedProxies: X-Forwarded-Proto: https
// from a trusted proxy makes cookies Secure and sends HSTS, and the logs
// show X-Forwarded-For's client; the same headers from any other peer are
// ignored.
func TestForwardedHeadersOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	headers := map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}
	for _, c := range []struct {
		name       string
		trusted    string
		secure     bool
		wantClient string
	}{
		{"trusted proxy", "127.0.0.1/32", true, "198.51.100.7"},
		{"untrusted peer", "10.0.0.0/8", false, "127.0.0.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			env := relaistest.New(t, func(cfg *config.Config) {
				cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix(c.trusted)}
			})
			checkSecure(t, c.name, consoleCookies(t, http.DefaultClient, env.URL, env.Operator, headers), c.secure)
			res := env.Do("GET", "/api/v1/whoami", env.Admin, nil, "X-Forwarded-Proto", "https", "X-Forwarded-For", "198.51.100.7")
			if got := res.Header.Get("Strict-Transport-Security") != ""; got != c.secure {
				t.Errorf("HSTS sent: %v; want %v", got, c.secure)
			}
			for line := range strings.Lines(env.Logs.String()) {
				if strings.Contains(line, "route=/api/v1/whoami") && (!strings.Contains(line, "client="+c.wantClient) || !strings.Contains(line, fmt.Sprintf("https=%v", c.secure))) {
					t.Errorf("request logged as %q; want client=%s https=%v", line, c.wantClient, c.secure)
				}
			}
		})
	}
}
