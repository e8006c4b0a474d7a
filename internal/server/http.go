package server

import (
	"context"
	"crypto/tls"
	"log"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/relais/relais/internal/config"
)

// NewHTTPServer returns the http.Server that serves h as cfg says: HTTPS
// with HTTP/2 and HTTP/1.1 when a certificate is configured, otherwise
// cleartext HTTP/1.1 and h2c (HTTP/2 with prior knowledge), which gRPC
// clients speak without TLS. Serve it with Serve. With TLS, the
// certificate is returned too: its Reload takes a renewed one.
//
// What net/http itself reports (a failed TLS handshake, a broken HTTP/2
// connection, a panic it recovered) goes to logger: at debug level for
// what any peer can cause (a scanner, a load balancer's TCP check), at
// warn level for the rest, never as unstructured lines beside slog's.
func NewHTTPServer(cfg config.Config, h http.Handler, logger *slog.Logger) (*http.Server, *Certificate, error) {
	srv := &http.Server{
		Handler:           h,
		ErrorLog:          log.New(serverErrors{logger}, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		Protocols:         new(http.Protocols),
		HTTP2:             HTTP2Config(cfg),
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

// HTTP2Config lets one HTTP/2 connection carry every worker stream a
// replica takes (RELAIS_STREAM_MAX_STREAMS) and, beside them, as many
// calls as net/http allows by default (250). At that default alone, a
// client multiplexing more streams on one connection (grpc-js, grpcio and
// connect-node all do) had its unary calls, heartbeat acknowledgements
// among them, queue behind the streams until missed heartbeats cut them
// and their tasks were handed back, attempts spent.
func HTTP2Config(cfg config.Config) *http.HTTP2Config {
	// net/http holds the bound in 32 bits.
	return &http.HTTP2Config{MaxConcurrentStreams: min(cfg.Stream.MaxStreams, math.MaxUint32-http2DefaultStreams) + http2DefaultStreams}
}

// http2DefaultStreams is net/http's default bound on the concurrent
// streams of one HTTP/2 connection.
const http2DefaultStreams = 250

// Serve serves srv on ln, over TLS when NewHTTPServer configured it. (Do
// not read srv.TLSConfig once serving: net/http fills it in for HTTP/2.)
func Serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// serverErrors is the writer of net/http's error log: each line it writes
// becomes one slog record.
type serverErrors struct{ logger *slog.Logger }

// peerCaused are the beginnings of the lines that report what a peer did
// to its own connection, which the server survives.
var peerCaused = []string{"http: TLS handshake error", "http2: server connection error", "http2: received GOAWAY", "http: URL query contains semicolon"}

func (s serverErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	for _, prefix := range peerCaused {
		if strings.HasPrefix(msg, prefix) {
			level = slog.LevelDebug
			break
		}
	}
	s.logger.Log(context.Background(), level, "http server: "+msg)
	return len(p), nil
}
