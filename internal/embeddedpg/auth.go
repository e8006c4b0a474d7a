package embeddedpg

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// How the cluster authenticates: every process on the machine can reach
// 127.0.0.1, so TCP needs the superuser's password (scram-sha-256), kept
// in passwordFile in the cluster folder. The Unix socket in Dir/run stays
// trusted: the cluster folder is 0700, so only the cluster user and root,
// who can read the data files anyway, reach it.

// passwordFile holds the superuser's password in the cluster folder, mode
// 0600, owned by the user running relais (the cluster user needs it only
// at initdb, through a copy). Its existence records that the role has this
// password, or that there is no cluster yet and initdb will give it.
const passwordFile = "password"

// initdbPasswordPrefix names the copy of the password initdb reads, in the
// cluster folder, removed once initdb is done.
const initdbPasswordPrefix = "initdb-password-"

// hbaTempFile is where writeHBA builds pg_hba.conf before renaming it.
const hbaTempFile = "pg_hba.conf.relais-tmp"

// scramIterations is PostgreSQL's default scram_iterations.
const scramIterations = 4096

// Host authentication methods written to pg_hba.conf.
const (
	hostPassword = "scram-sha-256"
	hostTrust    = "trust"
)

// maxPasswordFile bounds what readPassword reads: a password is 26 bytes.
const maxPasswordFile = 256

// newPassword returns 128 random bits as base32 text, which needs no
// escaping in a URL, a SQL literal or a shell.
func newPassword() string { return rand.Text() }

// readPassword returns the password recorded in the cluster folder dir,
// or "" when there is none. The file is opened without following a
// symlink and must look like a password: when relais runs as root, the
// cluster user owns dir and could otherwise plant a link that makes root
// read, and hand to that user's server, a file of its choosing.
func readPassword(dir string) (string, error) {
	path := filepath.Join(dir, passwordFile)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("embeddedpg: read the cluster password (run as the user that runs relais serve): %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("embeddedpg: read the cluster password: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("embeddedpg: %s is not a regular file; remove it and restart relais, which sets a new password", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxPasswordFile+1))
	if err != nil {
		return "", fmt.Errorf("embeddedpg: read the cluster password: %w", err)
	}
	pw := strings.TrimSpace(string(b))
	if pw == "" || len(b) > maxPasswordFile || strings.TrimLeft(pw, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		return "", fmt.Errorf("embeddedpg: %s does not hold a password relais wrote; remove it and restart relais, which sets a new password", path)
	}
	return pw, nil
}

// writePassword records pw in the cluster folder. The file is replaced
// atomically, so a crash leaves the old password or the new one.
func writePassword(dir, pw string) error {
	if err := replaceFile(dir, passwordFile, []byte(pw+"\n")); err != nil {
		return fmt.Errorf("embeddedpg: write the cluster password: %w", err)
	}
	return nil
}

// replaceFile writes data as dir's file name, replacing it atomically (a
// crash leaves the old content or the new), readable by its owner only.
func replaceFile(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	if err := writeNewFile(tmp, data, nil); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncPath(dir)
}

// writeInitdbPassword writes the copy of pw that initdb --pwfile reads,
// owned by the cluster user, and returns its path.
func writeInitdbPassword(dir, pw string, ra *runAs) (string, error) {
	path := filepath.Join(dir, initdbPasswordPrefix+strconv.Itoa(os.Getpid()))
	if err := writeNewFile(path, []byte(pw+"\n"), ra); err != nil {
		return "", fmt.Errorf("embeddedpg: initdb: password file: %w", err)
	}
	return path, nil
}

// writeNewFile writes a 0600 file that must not exist yet (a leftover of
// an interrupted write is removed first), handing it to ra when ra is not
// nil. O_EXCL refuses a symlink in its place, and the owner is changed on
// the open file, not on whatever the path may point to by then.
func writeNewFile(path string, data []byte, ra *runAs) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if ra != nil && ra.cred != nil {
		if err := f.Chown(int(ra.uid), int(ra.gid)); err != nil {
			f.Close()
			os.Remove(path)
			return fmt.Errorf("hand %s to user %s: %w", path, ra.name, err)
		}
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// hbaConf is the pg_hba.conf Start writes; host is the method for TCP
// from the machine (hostPassword, or hostTrust for a cluster that has no
// password and no socket to set one).
func hbaConf(host string) string {
	why := "# TCP from the machine needs the password kept in the cluster folder's\n" +
		"# password file: any local user can reach 127.0.0.1.\n"
	if host == hostTrust {
		why = "# TCP is trusted because this cluster has no password yet and its folder\n" +
			"# path is too long for the Unix socket relais sets it through: any local\n" +
			"# user can connect as superuser. Move it to a shorter path and restart.\n"
	}
	rules := ""
	for _, db := range []string{"all", "replication"} {
		rules += fmt.Sprintf("local   %-12s all                  trust\n", db)
	}
	for _, db := range []string{"all", "replication"} {
		for _, addr := range []string{"127.0.0.1/32", "::1/128"} {
			rules += fmt.Sprintf("host    %-12s all   %-14s %s\n", db, addr, host)
		}
	}
	return "# Written by relais at every start of its embedded cluster: edits are lost.\n" +
		"# The Unix socket is trusted: it sits in the cluster folder (mode 0700),\n" +
		"# which only the cluster user and root can enter.\n" + why + rules
}

// writeAuthConfig writes pg_hba.conf before the server starts and returns
// the host method it chose: the password, unless the role has none
// (hasPassword false) and there is no socket to set one through once the
// server runs. Trust over TCP is then kept, loudly: refusing to start
// would break a working installation, and briefly trusting TCP to set the
// password would let any local user in first.
func writeAuthConfig(cfg *config, hasPassword, sockets, created bool) (string, error) {
	host := hostPassword
	if !hasPassword && !sockets {
		host = hostTrust
		cfg.logger.Warn("embedded postgres: the cluster still trusts every local TCP connection, so any user on this machine can connect as superuser: "+
			"it was created without a password by an earlier relais, and its folder path is too long for the Unix socket through which relais sets one; "+
			fmt.Sprintf("move the data directory so that the cluster folder path has at most %d characters, and restart", maxSocketPath-1-len("/run/.s.PGSQL.65535")),
			"dir", cfg.dir)
	}
	wrote, err := writeHBA(cfg.dataDir, hbaConf(host), cfg.ra)
	if err != nil {
		return "", err
	}
	// initdb wrote its own, so a new cluster's rewrite is no news.
	if wrote && !created {
		cfg.logger.Info("embedded postgres: wrote pg_hba.conf", "tcp", host, "dir", cfg.dir)
	}
	return host, nil
}

// writeHBA puts content in dataDir/pg_hba.conf, owned by the cluster user
// who reads it, unless it is there already. It reports whether it wrote.
func writeHBA(dataDir, content string, ra *runAs) (bool, error) {
	path := filepath.Join(dataDir, "pg_hba.conf")
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, []byte(content)) {
		return false, nil
	}
	tmp := filepath.Join(dataDir, hbaTempFile)
	if err := writeNewFile(tmp, []byte(content), ra); err != nil {
		return false, fmt.Errorf("embeddedpg: write pg_hba.conf: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("embeddedpg: write pg_hba.conf: %w", err)
	}
	if err := syncPath(dataDir); err != nil {
		return false, fmt.Errorf("embeddedpg: write pg_hba.conf: %w", err)
	}
	return true, nil
}

// setPassword gives the postgres role pw over the trusted Unix socket. It
// sends a SCRAM verifier, not pw: the server stores it as is whatever its
// password_encryption (md5 by default before PostgreSQL 14), and pw never
// reaches the server, so no statement log or error report can show it.
func setPassword(ctx context.Context, socket, pw string) error {
	verifier, err := scramVerifier(pw)
	if err != nil {
		return fmt.Errorf("embeddedpg: set the password: %w", err)
	}
	c, err := wireConnect(ctx, "unix", socket, "postgres", nil)
	if err != nil {
		return fmt.Errorf("embeddedpg: set the password over %s: %w", socket, err)
	}
	defer c.Close()
	// The verifier is base64 and '$', ':' only: nothing to escape.
	if _, err := c.query("ALTER ROLE postgres PASSWORD '" + verifier + "'"); err != nil {
		return fmt.Errorf("embeddedpg: set the password: %w", err)
	}
	return nil
}

// scramVerifier returns what PostgreSQL stores for a scram-sha-256
// password (RFC 5803 layout), with a fresh salt.
func scramVerifier(pw string) (string, error) {
	salt := make([]byte, 16)
	rand.Read(salt)
	_, storedKey, serverKey, err := scramKeys(pw, salt, scramIterations)
	if err != nil {
		return "", err
	}
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt), b64(storedKey), b64(serverKey)), nil
}

// scramKeys derives the SCRAM-SHA-256 keys of pw (RFC 5802). pw is used
// as is: SASLprep leaves the ASCII passwords relais generates unchanged.
func scramKeys(pw string, salt []byte, iterations int) (clientKey, storedKey, serverKey []byte, err error) {
	salted, err := pbkdf2.Key(sha256.New, pw, salt, iterations, sha256.Size)
	if err != nil {
		return nil, nil, nil, err
	}
	clientKey = hmacSHA256(salted, "Client Key")
	sum := sha256.Sum256(clientKey)
	return clientKey, sum[:], hmacSHA256(salted, "Server Key"), nil
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// socketPath is the server's Unix socket in runDir.
func socketPath(runDir string, port int) string {
	return filepath.Join(runDir, ".s.PGSQL."+strconv.Itoa(port))
}

// socketsFit reports whether socket files in runDir fit in a socket
// address, whatever the port.
func socketsFit(runDir string) bool {
	return len(socketPath(runDir, 65535))+1 <= maxSocketPath
}

// clusterURL is the URL of database on the server at port, as postgres
// with password pw ("" for none).
func clusterURL(port int, pw, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     "127.0.0.1:" + strconv.Itoa(port),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	if pw != "" {
		u.User = url.UserPassword("postgres", pw)
	}
	return u.String()
}
