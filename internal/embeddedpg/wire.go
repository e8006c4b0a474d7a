package embeddedpg

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// wireConn is a minimal client of the PostgreSQL wire protocol: startup and
// simple queries with text results. It is enough for Start to set the
// superuser's password over the Unix socket, and keeps a driver out of the
// package's dependencies.
type wireConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// wireAuth answers an authentication request other than AuthenticationOk
// (code is the request's code, body what follows it). A nil wireAuth
// accepts trust authentication only.
type wireAuth func(c *wireConn, code uint32, body []byte) error

// errPasswordRequired is what a nil wireAuth returns when the server asks
// for credentials.
var errPasswordRequired = errors.New("server asked for a password; want trust authentication")

// wireConnect opens a session as user on database postgres. network is
// "unix" (address is the socket file) or "tcp".
func wireConnect(ctx context.Context, network, address, user string, auth wireAuth) (*wireConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	conn.SetDeadline(deadline)
	c := &wireConn{conn: conn, r: bufio.NewReader(conn)}

	params := "user\x00" + user + "\x00database\x00postgres\x00\x00"
	startup := binary.BigEndian.AppendUint32(nil, uint32(8+len(params)))
	startup = binary.BigEndian.AppendUint32(startup, 196608) // protocol 3.0
	startup = append(startup, params...)
	if _, err := conn.Write(startup); err != nil {
		conn.Close()
		return nil, err
	}
	if auth == nil {
		auth = func(*wireConn, uint32, []byte) error { return errPasswordRequired }
	}
	if err := c.readUntilReady(nil, auth); err != nil {
		conn.Close()
		return nil, fmt.Errorf("startup: %w", err)
	}
	return c, nil
}

// query runs sql (one or more statements) and returns the rows of the last
// result as text, NULL as "NULL".
func (c *wireConn) query(sql string) ([][]string, error) {
	if err := c.send('Q', append([]byte(sql), 0)); err != nil {
		return nil, err
	}
	var rows [][]string
	if err := c.readUntilReady(&rows, nil); err != nil {
		return nil, err
	}
	return rows, nil
}

// Close ends the session politely (Terminate) and closes the connection.
func (c *wireConn) Close() error {
	_ = c.send('X', nil)
	return c.conn.Close()
}

// send writes one message of type typ.
func (c *wireConn) send(typ byte, body []byte) error {
	msg := binary.BigEndian.AppendUint32([]byte{typ}, uint32(4+len(body)))
	_, err := c.conn.Write(append(msg, body...))
	return err
}

// receive reads one message.
func (c *wireConn) receive() (byte, []byte, error) {
	typ, err := c.r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	var n uint32
	if err := binary.Read(c.r, binary.BigEndian, &n); err != nil {
		return 0, nil, err
	}
	if n < 4 || n > 1<<24 {
		return 0, nil, fmt.Errorf("bad message length %d", n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return 0, nil, err
	}
	return typ, body, nil
}

// readUntilReady consumes messages up to ReadyForQuery, collecting data
// rows into rows (reset at each RowDescription), handing authentication
// requests to auth and failing on the first ErrorResponse. During startup
// the server closes the connection after an error, so that error is
// returned as soon as it arrives.
func (c *wireConn) readUntilReady(rows *[][]string, auth wireAuth) error {
	var firstErr error
	for {
		typ, body, err := c.receive()
		if err != nil {
			if firstErr != nil {
				return firstErr
			}
			return err
		}
		switch typ {
		case 'R':
			if len(body) < 4 {
				return errors.New("short authentication request")
			}
			code := binary.BigEndian.Uint32(body)
			if code == 0 {
				continue
			}
			if auth == nil {
				return fmt.Errorf("unexpected authentication request %d", code)
			}
			if err := auth(c, code, body[4:]); err != nil {
				return err
			}
		case 'E':
			if firstErr == nil {
				firstErr = fmt.Errorf("server error: %s", errorMessage(body))
			}
			if auth != nil {
				return firstErr
			}
		case 'T':
			if rows != nil {
				*rows = nil
			}
		case 'D':
			if rows != nil {
				*rows = append(*rows, dataRow(body))
			}
		case 'Z':
			return firstErr
		}
	}
}

// errorMessage returns the message field of an ErrorResponse.
func errorMessage(body []byte) string {
	for len(body) > 1 {
		field := body[0]
		end := 1
		for end < len(body) && body[end] != 0 {
			end++
		}
		if field == 'M' {
			return string(body[1:end])
		}
		body = body[min(end+1, len(body)):]
	}
	return "unknown error"
}

// dataRow decodes a DataRow; a malformed one yields the columns read so far.
func dataRow(body []byte) []string {
	if len(body) < 2 {
		return nil
	}
	cols := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	row := make([]string, 0, cols)
	for range cols {
		if len(body) < 4 {
			break
		}
		l := int32(binary.BigEndian.Uint32(body))
		body = body[4:]
		if l < 0 {
			row = append(row, "NULL")
			continue
		}
		if int(l) > len(body) {
			break
		}
		row = append(row, string(body[:l]))
		body = body[l:]
	}
	return row
}
