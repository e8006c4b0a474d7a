package embeddedpg

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// query runs sql on c over its trusted Unix socket, as the tests need
// neither psql nor a driver.
func query(c *Cluster, sql string) ([][]string, error) {
	return queryAt(c.cfg.runDir, c.port, sql)
}

// queryAt runs sql over the Unix socket in runDir of the server on port.
func queryAt(runDir string, port int, sql string) ([][]string, error) {
	return runQuery("unix", socketPath(runDir, port), nil, sql)
}

// tcpQuery runs sql over TCP on 127.0.0.1, authenticating with password
// ("" to offer none).
func tcpQuery(port int, password, sql string) ([][]string, error) {
	var auth wireAuth
	if password != "" {
		auth = scramClient(password)
	}
	return runQuery("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), auth, sql)
}

// urlQuery runs sql on the server a URL from URL or RunningURL names.
func urlQuery(raw, sql string) ([][]string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Hostname() != "127.0.0.1" || u.User.Username() != "postgres" || u.Path != "/postgres" {
		return nil, fmt.Errorf("URL %s: want postgres@127.0.0.1/postgres", u.Redacted())
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, err
	}
	password, _ := u.User.Password()
	return tcpQuery(port, password, sql)
}

func runQuery(network, address string, auth wireAuth, sql string) ([][]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := wireConnect(ctx, network, address, "postgres", auth)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.query(sql)
}

// scramClient answers SCRAM-SHA-256 authentication (RFC 5802, without
// channel binding) with password.
func scramClient(password string) wireAuth {
	var clientFirstBare, clientFinalBare string
	var authMessage string // kept to check the server's signature
	var serverKey []byte
	return func(c *wireConn, code uint32, body []byte) error {
		switch code {
		case 10: // AuthenticationSASL: the mechanisms offered
			if !bytes.Contains(body, []byte("SCRAM-SHA-256\x00")) {
				return fmt.Errorf("server offers %q, want SCRAM-SHA-256", body)
			}
			clientFirstBare = "n=,r=" + rand.Text()
			first := "n,," + clientFirstBare
			msg := append([]byte("SCRAM-SHA-256\x00"), binary.BigEndian.AppendUint32(nil, uint32(len(first)))...)
			return c.send('p', append(msg, first...))
		case 11: // AuthenticationSASLContinue: server-first-message
			serverFirst := string(body)
			attrs := scramAttrs(serverFirst)
			salt, err := base64.StdEncoding.DecodeString(attrs["s"])
			if err != nil {
				return fmt.Errorf("server salt: %w", err)
			}
			iterations, err := strconv.Atoi(attrs["i"])
			if err != nil {
				return fmt.Errorf("server iterations: %w", err)
			}
			clientKey, storedKey, sk, err := scramKeys(password, salt, iterations)
			if err != nil {
				return err
			}
			serverKey = sk
			clientFinalBare = "c=biws,r=" + attrs["r"]
			authMessage = clientFirstBare + "," + serverFirst + "," + clientFinalBare
			proof := hmacSHA256(storedKey, authMessage)
			for i := range proof {
				proof[i] ^= clientKey[i]
			}
			return c.send('p', []byte(clientFinalBare+",p="+base64.StdEncoding.EncodeToString(proof)))
		case 12: // AuthenticationSASLFinal: the server proves it knew the password too
			want := base64.StdEncoding.EncodeToString(hmacSHA256(serverKey, authMessage))
			if !hmac.Equal([]byte(scramAttrs(string(body))["v"]), []byte(want)) {
				return errors.New("server signature does not match")
			}
			return nil
		}
		return fmt.Errorf("unexpected authentication request %d", code)
	}
}

func scramAttrs(msg string) map[string]string {
	attrs := map[string]string{}
	for _, kv := range strings.Split(msg, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			attrs[k] = v
		}
	}
	return attrs
}

// The test client checks the server's signature, so a session it opens
// proves both sides derived the same keys; this pins the verifier layout
// PostgreSQL parses.
func TestScramVerifierLayout(t *testing.T) {
	t.Parallel()
	v, err := scramVerifier("pencil")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(v, "$")
	if len(parts) != 3 || parts[0] != "SCRAM-SHA-256" || !strings.HasPrefix(parts[1], "4096:") || strings.Count(parts[2], ":") != 1 {
		t.Fatalf("verifier = %q, want SCRAM-SHA-256$4096:salt$stored:server", v)
	}
	// RFC 7677's test vector: user "user", password "pencil".
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	clientKey, storedKey, serverKey, err := scramKeys("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	authMessage := "n=user,r=rOprNGfwEbeRWgbNEkqO,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
	proof := hmacSHA256(storedKey, authMessage)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	if got, want := base64.StdEncoding.EncodeToString(proof), "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="; got != want {
		t.Errorf("client proof = %s, want %s", got, want)
	}
	if got, want := base64.StdEncoding.EncodeToString(hmacSHA256(serverKey, authMessage)), "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; got != want {
		t.Errorf("server signature = %s, want %s", got, want)
	}
}
