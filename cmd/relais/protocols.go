package main

import "net/http"

// listenProtocols are what relais serve speaks on its one listener:
// HTTP/1.1 for browsers, REST clients and Connect or gRPC-Web workers, and
// HTTP/2 for gRPC workers, over TLS (negotiated by ALPN) and in cleartext
// (h2c with prior knowledge, as gRPC clients speak it without TLS).
func listenProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return p
}
