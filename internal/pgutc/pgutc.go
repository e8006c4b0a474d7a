// Package pgutc has pgx read timestamptz values in UTC. pgx reads them in
// the process's local zone by default, so that on a host not set to UTC
// (a developer's laptop) one answer would mix times the engine made, in
// UTC, with times read back, at another offset.
package pgutc

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Register makes m read timestamptz (and arrays of them) in UTC.
func Register(m *pgtype.Map) {
	t := &pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}}
	m.RegisterType(t)
	// The array type holds its element type: it must be registered again
	// to take the new one.
	m.RegisterType(&pgtype.Type{Name: "_timestamptz", OID: pgtype.TimestamptzArrayOID, Codec: &pgtype.ArrayCodec{ElementType: t}})
}

// Configure registers the codec on every connection cfg's pool opens.
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
