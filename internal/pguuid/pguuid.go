// Package pguuid lets pgx send and read github.com/google/uuid values in
// PostgreSQL's binary format. Without it pgx takes the values' database/sql
// methods: every uuid sent becomes a 36-character string (after an encode
// attempt that fails and allocates its error), which PostgreSQL parses
// again, and every uuid read is formatted as text and parsed back. Ids are
// in nearly every statement Relais runs, so that is CPU on both sides of
// each round trip.
package pguuid

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Register makes m encode and scan uuid.UUID (and pointers to it, and
// slices of it, through pgx's own wrappers) as PostgreSQL uuid and
// uuid[] values directly.
func Register(m *pgtype.Map) {
	t := &pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: codec{}}
	m.RegisterType(t)
	// The array type holds its element type: it must be registered again
	// to take the new one.
	m.RegisterType(&pgtype.Type{Name: "_uuid", OID: pgtype.UUIDArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
	// Where no parameter type is known (the simple protocol), the Go type
	// names the PostgreSQL one.
	m.RegisterDefaultPgType(uuid.UUID{}, "uuid")
	m.RegisterDefaultPgType([]uuid.UUID{}, "_uuid")
}

// Configure registers the codec on each connection cfg's pool opens,
// after the AfterConnect cfg already has.
func Configure(cfg *pgxpool.Config) {
	then := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		Register(conn.TypeMap())
		if then != nil {
			return then(ctx, conn)
		}
		return nil
	}
}

// codec is pgx's uuid codec, taught uuid.UUID before anything else.
type codec struct{ pgtype.UUIDCodec }

func (c codec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(uuid.UUID); ok {
		if format == pgtype.BinaryFormatCode {
			return encodeBinary{}
		}
		return encodeText{}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c codec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		if format == pgtype.BinaryFormatCode {
			return scanBinary{}
		}
		return scanText{}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

type encodeBinary struct{}

func (encodeBinary) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(uuid.UUID)
	return append(buf, u[:]...), nil
}

type encodeText struct{}

func (encodeText) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, value.(uuid.UUID).String()...), nil
}

type scanBinary struct{}

func (scanBinary) Scan(src []byte, target any) error {
	if src == nil {
		return fmt.Errorf("cannot scan NULL into *uuid.UUID")
	}
	if len(src) != 16 {
		return fmt.Errorf("uuid: %d bytes in binary format, want 16", len(src))
	}
	copy(target.(*uuid.UUID)[:], src)
	return nil
}

type scanText struct{}

func (scanText) Scan(src []byte, target any) error {
	if src == nil {
		return fmt.Errorf("cannot scan NULL into *uuid.UUID")
	}
	u, err := uuid.ParseBytes(src)
	if err != nil {
		return fmt.Errorf("uuid: %w", err)
	}
	*target.(*uuid.UUID) = u
	return nil
}
