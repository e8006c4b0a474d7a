package keyring

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestSealOpenAndRotate(t *testing.T) {
	t.Parallel()
	old := NewKeySpec("k1")
	ring1, err := Parse(old)
	if err != nil {
		t.Fatal(err)
	}
	sealed := ring1.Seal([]byte("4111-canary"), []byte("occurrence/1/inputs"))
	if bytes.Contains(sealed, []byte("canary")) {
		t.Fatal("plaintext visible in ciphertext")
	}
	ring2, err := Parse(NewKeySpec("k2") + "," + old)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := ring2.Open(sealed, []byte("occurrence/1/inputs"))
	if err != nil || string(pt) != "4111-canary" {
		t.Fatalf("open with rotated ring = %q, %v", pt, err)
	}
	resealed := ring2.Seal(pt, []byte("occurrence/1/inputs"))
	if id, _ := KeyID(resealed); id != "k2" {
		t.Errorf("new values sealed with %q, want k2", id)
	}
	if _, err := ring2.Open(sealed, []byte("occurrence/2/inputs")); err == nil {
		t.Error("a value opened under another place's aad")
	}
	onlyNew, _ := Parse(strings.Split(ring2.order[0], ",")[0] + ":" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	if _, err := onlyNew.Open(sealed, []byte("occurrence/1/inputs")); !errors.Is(err, ErrNoKey) {
		t.Errorf("open without the old key: %v; want ErrNoKey", err)
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"", "k1", "k1:notbase64!", "k1:AAAA", "bad id:" + strings.Repeat("A", 44), NewKeySpec("a") + "," + NewKeySpec("a")} {
		if _, err := Parse(spec); err == nil {
			t.Errorf("Parse(%q) accepted", spec)
		}
	}
}

func TestDigest(t *testing.T) {
	t.Parallel()
	old := NewKeySpec("k1")
	ring1, _ := Parse(old)
	data := []byte(`{"pin":"1234"}`)
	d := ring1.Digest(data)
	if !strings.HasPrefix(d, "hmac-sha256:k1:") || !IsKeyedDigest(d) {
		t.Fatalf("digest %q: want hmac-sha256:k1:…", d)
	}
	if ring1.Digest(data) != d || !ring1.MatchDigest(data, d) {
		t.Error("equal data must digest equally and match")
	}
	if ring1.MatchDigest([]byte(`{"pin":"1235"}`), d) {
		t.Error("other data matched the digest")
	}
	// Without the key, the digest cannot be recomputed from a guess.
	other, _ := Parse(NewKeySpec("k1"))
	if other.Digest(data) == d || other.MatchDigest(data, d) {
		t.Error("another key with the same id produced or matched the digest")
	}
	// After rotation the old key still matches what it digested; once it
	// is removed, nothing does.
	ring2, _ := Parse(NewKeySpec("k2") + "," + old)
	if !ring2.MatchDigest(data, d) || !strings.HasPrefix(ring2.Digest(data), "hmac-sha256:k2:") {
		t.Error("a rotated ring must match old digests and make new ones with its primary key")
	}
	onlyNew, _ := Parse(NewKeySpec("k2"))
	if onlyNew.MatchDigest(data, d) {
		t.Error("a ring without k1 matched a k1 digest")
	}
	for _, bad := range []string{"", "sha256:00", "hmac-sha256:k1", "hmac-sha256:k1:zz"} {
		if ring1.MatchDigest(data, bad) {
			t.Errorf("malformed digest %q matched", bad)
		}
	}
}

// A key file may hold blank and comment lines; an error names the file's
// line (as an editor numbers it) and never the key material.
func TestParseFile(t *testing.T) {
	t.Parallel()
	k1, k2 := NewKeySpec("k1"), NewKeySpec("k2")
	ring, err := ParseFile("# the first key seals\r\n" + k2 + "\r\n\n   # k1: retire after relais keys rotate\n\t" + k1 + "\n")
	if err != nil {
		t.Fatalf("ParseFile with comments: %v", err)
	}
	if ids := ring.IDs(); len(ids) != 2 || ids[0] != "k2" || ids[1] != "k1" {
		t.Errorf("ParseFile ids = %q; want k2, k1", ids)
	}
	const secret = "c2VjcmV0LWtleS1tYXRlcmlhbC1uZXZlci1zaG93bg" // not a key: 31 bytes
	for content, want := range map[string]string{
		"# keys\n\nk1:" + secret + "\n":                     `keyring: line 3: key "k1": decodes to 31 bytes`,
		"# keys\n" + k1 + "\n\n" + secret + "\n":            "keyring: line 4: want id:base64key",
		k1 + "\n# k1 again\n" + k1 + "\n":                   `keyring: line 3: key "k1" appears twice`,
		k1 + " # the first key\n":                           "keyring: line 1: a comment takes a line of its own",
		"# no key yet\n\n":                                  "keyring: no key in the file",
		"\n\nk1:" + strings.Repeat("!", 10) + secret + "\n": `keyring: line 3: key "k1": not base64`,
	} {
		_, err := ParseFile(content)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ParseFile(%q) = %v; want %q", content, err, want)
		}
		if err != nil && strings.Contains(err.Error(), secret[:10]) {
			t.Errorf("ParseFile(%q) error %q shows key material", content, err)
		}
	}
	// RELAIS_DATA_KEYS, on one line, names an entry by its rank.
	if _, err := Parse(k1 + "," + secret); err == nil || err.Error() != "keyring: entry 2: want id:base64key with id of letters, digits, . _ -" {
		t.Errorf("Parse of a malformed second entry = %v", err)
	}
}
