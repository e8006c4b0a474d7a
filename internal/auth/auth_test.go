package auth

import (
	"bytes"
	"strings"
	"testing"
)

func TestNewTokenIsRandomAndHashed(t *testing.T) {
	t.Parallel()
	a, ha := NewToken()
	b, hb := NewToken()
	if a == b || bytes.Equal(ha, hb) {
		t.Fatal("two tokens are equal")
	}
	if !strings.HasPrefix(a, "rls_") || len(a) < 40 {
		t.Errorf("token %q lacks prefix or entropy", a)
	}
	if !bytes.Equal(Hash(a), ha) || len(ha) != 32 {
		t.Error("hash does not match")
	}
}

func TestAdminIsAllowedEverywhere(t *testing.T) {
	t.Parallel()
	if !Allowed(RoleAdmin, RoleConsumer) || Allowed(RoleOperator, RoleDesigner) {
		t.Fatal("Allowed is wrong")
	}
}
