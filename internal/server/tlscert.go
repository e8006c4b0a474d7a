package server

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Certificate is the listener's TLS certificate, read from its files at
// start and again by Reload: certificates renewed every few weeks
// (certbot, cert-manager) are taken without a restart, by new connections
// (those open keep the one they began with).
type Certificate struct {
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]

	mu sync.Mutex
	// certPEM and keyPEM are the files' contents as last loaded: Reload
	// says whether they changed.
	certPEM, keyPEM []byte
}

// LoadCertificate reads a PEM certificate chain and its key.
func LoadCertificate(certFile, keyFile string) (*Certificate, error) {
	c := &Certificate{certFile: certFile, keyFile: keyFile}
	if _, err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the files again and serves what they hold from the next
// connection on, when it differs from what is served; changed says
// whether it did. A pair that does not load (a renewal caught half
// written, a key that does not match) is an error and changes nothing:
// the certificate served stays.
func (c *Certificate) Reload() (changed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	certPEM, err := os.ReadFile(c.certFile)
	if err != nil {
		return false, fmt.Errorf("RELAIS_TLS_CERT_FILE: %w", err)
	}
	keyPEM, err := os.ReadFile(c.keyFile)
	if err != nil {
		return false, fmt.Errorf("RELAIS_TLS_KEY_FILE: %w", err)
	}
	if c.current.Load() != nil && bytes.Equal(certPEM, c.certPEM) && bytes.Equal(keyPEM, c.keyPEM) {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("RELAIS_TLS_CERT_FILE, RELAIS_TLS_KEY_FILE: %w", err)
	}
	c.certPEM, c.keyPEM = certPEM, keyPEM
	c.current.Store(&cert)
	return true, nil
}

// NotAfter is when the certificate served expires.
func (c *Certificate) NotAfter() time.Time {
	return c.current.Load().Leaf.NotAfter
}

// Serial is the serial number of the certificate served, in hexadecimal.
func (c *Certificate) Serial() string {
	return fmt.Sprintf("%X", c.current.Load().Leaf.SerialNumber)
}

func (c *Certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.current.Load(), nil
}
