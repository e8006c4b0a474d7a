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
