// Package keyring encrypts secret values at rest with AES-256-GCM under
// named keys, so keys can be rotated: every ciphertext names the key that
// sealed it, the first key of the ring seals new values, and older keys stay
// able to open what they sealed until a rotation has re-encrypted it.
package keyring

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// version prefixes every ciphertext so the format can evolve.
const version = 1

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// Keyring holds named 256-bit keys; the first one seals.
type Keyring struct {
	primary string
	order   []string
	aeads   map[string]cipher.AEAD
	macKeys map[string][]byte // per key id, derived: never the encryption key itself
}

// ErrNoKey is returned when a ciphertext names a key the ring lacks.
var ErrNoKey = errors.New("keyring: key not in the ring")

// Parse reads "id:base64key[,id:base64key...]" (standard or URL base64 of 32
// bytes), as RELAIS_DATA_KEYS gives them. Whitespace and newlines between
// entries are ignored. An error names the key by its id, or a malformed
// entry by its rank. A key file is read by ParseFile.
func Parse(spec string) (*Keyring, error) {
	k := newKeyring()
	for i, f := range entries(spec) {
		err := k.add(f)
		if errors.Is(err, errEntry) {
			return nil, fmt.Errorf("keyring: entry %d: %w", i+1, err)
		}
		if err != nil {
			return nil, fmt.Errorf("keyring: %w", err)
		}
	}
	return k.done("no key given")
}

// ParseFile reads a key file: Parse's entries, one per line (or several
// on a line, separated by commas). Blank lines and comment lines, whose
// first non-space character is #, are skipped; an error names its line,
// as an editor numbers it.
func ParseFile(content string) (*Keyring, error) {
	k := newKeyring()
	for i, line := range strings.Split(content, "\n") {
		if trimmed := strings.TrimSpace(line); trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		for _, f := range entries(line) {
			if err := k.addFromFile(f); err != nil {
				return nil, fmt.Errorf("keyring: line %d: %w", i+1, err)
			}
		}
	}
	return k.done("no key in the file (only blank or # comment lines)")
}

func newKeyring() *Keyring {
	return &Keyring{aeads: map[string]cipher.AEAD{}, macKeys: map[string][]byte{}}
}

// entries splits a list of keys at commas and whitespace.
func entries(spec string) []string {
	return strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' || r == ' ' || r == '\t' })
}

// addFromFile is add, with a comment after a key on its line refused as
// such rather than as a malformed key.
func (k *Keyring) addFromFile(entry string) error {
	if strings.HasPrefix(entry, "#") {
		return errors.New("a comment takes a line of its own, with # first")
	}
	return k.add(entry)
}

// errEntry refuses an entry that is not id:base64key. It does not quote
// the entry, which may be a key.
var errEntry = errors.New("want id:base64key with id of letters, digits, . _ -")

// add adds the key of one "id:base64key" entry to the ring. Its errors
// never quote the entry: only an id, never key material, may be named.
func (k *Keyring) add(entry string) error {
	id, b64, ok := strings.Cut(entry, ":")
	if !ok || !idPattern.MatchString(id) {
		return errEntry
	}
	key, err := decodeKey(b64)
	if err != nil {
		return fmt.Errorf("key %q: %w", id, err)
	}
	if _, dup := k.aeads[id]; dup {
		return fmt.Errorf("key %q appears twice", id)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return fmt.Errorf("key %q: %w", id, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return fmt.Errorf("key %q: %w", id, err)
	}
	k.aeads[id] = aead
	k.macKeys[id] = deriveMACKey(key)
	k.order = append(k.order, id)
	return nil
}

// done returns the ring once every entry is added, or the error empty
// when none was.
func (k *Keyring) done(empty string) (*Keyring, error) {
	if len(k.order) == 0 {
		return nil, errors.New("keyring: " + empty)
	}
	k.primary = k.order[0]
	return k, nil
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("decodes to %d bytes; AES-256 needs 32", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// NewKeySpec returns a fresh "id:base64key" entry.
func NewKeySpec(id string) string {
	var b [32]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program rather than return an error
	return id + ":" + base64.StdEncoding.EncodeToString(b[:])
}

// Primary is the id of the key that seals.
func (k *Keyring) Primary() string { return k.primary }

// IDs returns every key id, primary first.
func (k *Keyring) IDs() []string { return append([]string(nil), k.order...) }

// Seal encrypts plaintext under the primary key. aad binds the ciphertext to
// its place (e.g. "occurrence/<id>/inputs") so a ciphertext copied to another
// row does not open there.
func (k *Keyring) Seal(plaintext, aad []byte) []byte {
	aead := k.aeads[k.primary]
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce) // never fails: crypto/rand crashes the program rather than return an error
	var b bytes.Buffer
	b.WriteByte(version)
	b.WriteByte(byte(len(k.primary)))
	b.WriteString(k.primary)
	b.Write(nonce)
	return aead.Seal(b.Bytes(), nonce, plaintext, aad)
}

// KeyID returns the id of the key that sealed a ciphertext.
func KeyID(sealed []byte) (string, error) {
	if len(sealed) < 2 || sealed[0] != version || len(sealed) < 2+int(sealed[1]) {
		return "", errors.New("keyring: not a sealed value")
	}
	return string(sealed[2 : 2+int(sealed[1])]), nil
}

// Open decrypts a value sealed by any key of the ring.
func (k *Keyring) Open(sealed, aad []byte) ([]byte, error) {
	id, err := KeyID(sealed)
	if err != nil {
		return nil, err
	}
	aead, ok := k.aeads[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoKey, id)
	}
	rest := sealed[2+len(id):]
	if len(rest) < aead.NonceSize() {
		return nil, errors.New("keyring: truncated value")
	}
	nonce, ct := rest[:aead.NonceSize()], rest[aead.NonceSize():]
	pt, err := aead.Open(nil, nonce, ct, aad)
	if err != nil {
		return nil, fmt.Errorf("keyring: value sealed with key %q does not open (wrong key or tampered): %w", id, err)
	}
	return pt, nil
}

// digestPrefix starts every keyed digest; the key id follows.
const digestPrefix = "hmac-sha256:"

// deriveMACKey separates the digest key from the encryption key, so that
// neither use can weaken the other.
func deriveMACKey(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("relais keyring digest v1"))
	return m.Sum(nil)
}

// Digest returns a keyed digest of data under the primary key,
// "hmac-sha256:<key id>:<hex>". Equal data digest equally under one key, so
// it serves replay detection; unlike a plain hash it lets no one holding
// only the database confirm a guess of a protected value it covers.
func (k *Keyring) Digest(data []byte) string {
	return digestPrefix + k.primary + ":" + hex.EncodeToString(k.mac(k.primary, data))
}

// MatchDigest reports whether d is the digest of data under the key d
// names; it is false when the ring no longer holds that key.
func (k *Keyring) MatchDigest(data []byte, d string) bool {
	id, sum, ok := splitDigest(d)
	if !ok || k.macKeys[id] == nil {
		return false
	}
	want, err := hex.DecodeString(sum)
	return err == nil && hmac.Equal(want, k.mac(id, data))
}

// DigestKey is the id of the key a digest made by Digest names, and
// whether the ring still holds it; "" for a digest Digest did not make.
func (k *Keyring) DigestKey(d string) (id string, held bool) {
	id, _, ok := splitDigest(d)
	if !ok {
		return "", false
	}
	return id, k != nil && k.macKeys[id] != nil
}

// splitDigest is the key id and the hex sum of a digest Digest made.
func splitDigest(d string) (id, sum string, ok bool) {
	rest, ok := strings.CutPrefix(d, digestPrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, ":")
}

// IsKeyedDigest reports whether d was made by Digest.
func IsKeyedDigest(d string) bool { return strings.HasPrefix(d, digestPrefix) }

func (k *Keyring) mac(id string, data []byte) []byte {
	m := hmac.New(sha256.New, k.macKeys[id])
	m.Write(data)
	return m.Sum(nil)
}
