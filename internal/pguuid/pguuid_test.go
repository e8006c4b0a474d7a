package pguuid_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/relais/relais/engine"
	"github.com/relais/relais/internal/dbtest"
	"github.com/relais/relais/internal/pguuid"
)

func TestMain(m *testing.M) { dbtest.Main(m, engine.SchemaFingerprint(), engine.Migrate) }

// Without Register, pgx plans uuid.UUID through database/sql (a string
// each way).
func TestRegisterPlansUUIDsInBinary(t *testing.T) {
	m := pgtype.NewMap()
	pguuid.Register(m)
	u := uuid.New()
	buf, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u, nil)
	if err != nil || string(buf) != string(u[:]) {
		t.Errorf("encoded %x, %v; want the 16 bytes %x", buf, err, u[:])
	}
	if p := m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, u); fmt.Sprintf("%T", p) != "pguuid.encodeBinary" {
		t.Errorf("encode plan for uuid.UUID = %T, want pguuid.encodeBinary", p)
	}
	var back uuid.UUID
	if p := m.PlanScan(pgtype.UUIDOID, pgtype.BinaryFormatCode, &back); fmt.Sprintf("%T", p) != "pguuid.scanBinary" {
		t.Errorf("scan plan for *uuid.UUID = %T, want pguuid.scanBinary", p)
	}
	if f := m.FormatCodeForOID(pgtype.UUIDArrayOID); f != pgtype.BinaryFormatCode {
		t.Errorf("uuid[] format = %d, want binary", f)
	}
}

// Every shape the generated queries use, in both formats: the extended
// protocol (binary) and the simple one (text), checked against
// PostgreSQL's own text form so that a byte order mistake cannot pass.
func TestUUIDsRoundTripThroughPostgreSQL(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := context.Background()
	a, b := uuid.Must(uuid.NewV7()), uuid.New()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			var (
				one       uuid.UUID
				some, nul *uuid.UUID
				many      []uuid.UUID
				text      string
			)
			var none *uuid.UUID
			err := pool.QueryRow(ctx, "select $1::uuid, $2::uuid, $3::uuid, $4::uuid[], $1::uuid::text",
				mode, a, &b, none, []uuid.UUID{b, a}).Scan(&one, &some, &nul, &many, &text)
			if err != nil {
				t.Fatal(err)
			}
			if one != a || some == nil || *some != b || nul != nil || !slices.Equal(many, []uuid.UUID{b, a}) {
				t.Errorf("read back %v %v %v %v, want %v %v <nil> [%v %v]", one, some, nul, many, a, b, b, a)
			}
			if text != a.String() {
				t.Errorf("PostgreSQL read %s, want %s", text, a)
			}
			var found bool
			if err := pool.QueryRow(ctx, "select $1::uuid = any($2::uuid[])", mode, a, []uuid.UUID{b, a}).Scan(&found); err != nil || !found {
				t.Errorf("any(array) = %v, %v; want true", found, err)
			}
		})
	}
	var u uuid.UUID
	if err := pool.QueryRow(ctx, "select null::uuid").Scan(&u); err == nil {
		t.Error("NULL scanned into a uuid.UUID without an error")
	}
}
