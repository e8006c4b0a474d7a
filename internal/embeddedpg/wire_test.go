package embeddedpg

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// query runs sql over the PostgreSQL wire protocol as user postgres on
// database postgres (trust authentication) and returns the rows of the
// last result as text. It exists so the tests need neither psql nor a
// driver dependency.
func query(port int, sql string) ([][]string, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(conn)

	params := "user\x00postgres\x00database\x00postgres\x00\x00"
	startup := binary.BigEndian.AppendUint32(nil, uint32(8+len(params)))
	startup = binary.BigEndian.AppendUint32(startup, 196608) // protocol 3.0
	startup = append(startup, params...)
	if _, err := conn.Write(startup); err != nil {
		return nil, err
	}
	if _, err := readUntilReady(r, nil); err != nil {
		return nil, fmt.Errorf("startup: %w", err)
	}

	msg := []byte{'Q'}
	msg = binary.BigEndian.AppendUint32(msg, uint32(4+len(sql)+1))
	msg = append(msg, sql...)
	msg = append(msg, 0)
	if _, err := conn.Write(msg); err != nil {
		return nil, err
	}
	var rows [][]string
	if _, err := readUntilReady(r, &rows); err != nil {
		return nil, err
	}
	conn.Write([]byte{'X', 0, 0, 0, 4})
	return rows, nil
}

// readUntilReady consumes messages up to ReadyForQuery, collecting data
// rows into rows (reset at each RowDescription) and failing on an
// ErrorResponse or a non-trust authentication request.
func readUntilReady(r *bufio.Reader, rows *[][]string) (byte, error) {
	var firstErr error
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		var n uint32
		if err := binary.Read(r, binary.BigEndian, &n); err != nil {
			return 0, err
		}
		if n < 4 || n > 1<<24 {
			return 0, fmt.Errorf("bad message length %d", n)
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return 0, err
		}
		switch typ {
		case 'R':
			if len(body) < 4 || binary.BigEndian.Uint32(body) != 0 {
				return 0, errors.New("server asked for a password; want trust authentication")
			}
		case 'E':
			if firstErr == nil {
				firstErr = fmt.Errorf("server error: %s", errorMessage(body))
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
			return typ, firstErr
		}
	}
}

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

func dataRow(body []byte) []string {
	cols := int(binary.BigEndian.Uint16(body))
	body = body[2:]
	row := make([]string, 0, cols)
	for range cols {
		l := int32(binary.BigEndian.Uint32(body))
		body = body[4:]
		if l < 0 {
			row = append(row, "NULL")
			continue
		}
		row = append(row, string(body[:l]))
		body = body[l:]
	}
	return row
}
