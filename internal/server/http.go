package server

import (
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/relais/relais/internal/config"
)

// NewHTTPServer returns the http.Server that serves h as cfg says: HTTPS
// with HTTP/2 and HTTP/1.1 when a certificate is configured, otherwise
// cleartext HTTP/1.1 and h2c (HTTP/2 with prior knowledge), which gRPC
// clients speak without TLS. Serve it with Serve. With TLS, the
// certificate is returned too: its Reload takes a renewed one.
func NewHTTPServer(cfg config.Config, h http.Handler) (*http.Server, *Certificate, error) {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		Protocols:         new(http.Protocols),
	}
	srv.Protocols.SetHTTP1(true)
	if cfg.TLSCertFile == "" {
		srv.Protocols.SetUnencryptedHTTP2(true)
		return srv, nil, nil
	}
	cert, err := LoadCertificate(cfg.TLSCertFile, cfg.TLSKeyFile)
	if err != nil {
		return nil, nil, err
	}
	srv.Protocols.SetHTTP2(true)
	srv.TLSConfig = &tls.Config{GetCertificate: cert.get, MinVersion: tls.VersionTLS12}
	return srv, cert, nil
}

// Serve serves srv on ln, over TLS when NewHTTPServer configured it. (Do
// not read srv.TLSConfig once serving: net/http fills it in for HTTP/2.)
func Serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}
