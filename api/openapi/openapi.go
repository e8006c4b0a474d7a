// Package openapi holds the OpenAPI 3.1 description of Relais's HTTP API:
// every /api/v1 route (the pull protocol included) and the Camunda facade
// under /engine-rest, with their parameters, bodies, problem+json errors
// and roles. The document is written by hand in openapi.yaml, next to the
// routes it describes, and served as JSON at /api/v1/openapi.json. Tests
// keep it in step with the router (every route documented, nothing
// documented that the router lacks) and with the suite's real traffic
// (every exchange valid against it, every route exercised).
package openapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

//go:generate go run ./gen

//go:embed openapi.yaml
var source []byte

// YAML is the document as written.
func YAML() []byte { return source }

// JSON is the document as JSON, converted once.
var JSON = sync.OnceValue(func() []byte {
	b, err := toJSON(source)
	if err != nil {
		// The document is embedded: a test fails on it long before a
		// binary ships.
		panic("openapi: " + err.Error())
	}
	return b
})

// Indented is the document as api/openapi/openapi.json holds it: JSON()
// indented by two spaces, with a final newline.
func Indented() []byte {
	var b bytes.Buffer
	_ = json.Indent(&b, JSON(), "", "  ")
	b.WriteByte('\n')
	return b.Bytes()
}

// ETag is the served document's strong entity tag: the SHA-256 of its
// bytes, computed once. It changes when the document does, which only a
// new build does.
var ETag = sync.OnceValue(func() string {
	sum := sha256.Sum256(JSON())
	return `"` + hex.EncodeToString(sum[:]) + `"`
})

// Serve answers a GET (or HEAD) of the document: the JSON with its ETag,
// to be revalidated before each use (Cache-Control: no-cache), or 304 Not
// Modified, without a body, to an If-None-Match that names the ETag (or
// is *). The caller checks who may read it.
//
// A client that accepts gzip gets the document compressed (OpenAPI QA:
// 170 KB sent whole to every generator), under an entity tag of its own,
// as RFC 9110 asks of another representation; either tag revalidates.
func Serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Accept-Encoding")
	h.Set("Cache-Control", "no-cache")
	body, etag := JSON(), ETag()
	zipped := acceptsGzip(r.Header.Values("Accept-Encoding"))
	if zipped {
		body, etag = gzipped(), gzipETag()
	}
	h.Set("ETag", etag)
	if tags := r.Header.Values("If-None-Match"); noneMatch(tags, ETag()) || noneMatch(tags, gzipETag()) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	if zipped {
		h.Set("Content-Encoding", "gzip")
	}
	_, _ = w.Write(body)
}

// gzipped is JSON() compressed, once.
var gzipped = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(JSON())
	_ = zw.Close()
	return b.Bytes()
})

// gzipETag is the compressed representation's entity tag, the SHA-256 of
// its bytes as ETag is of the JSON's.
var gzipETag = sync.OnceValue(func() string {
	sum := sha256.Sum256(gzipped())
	return `"` + hex.EncodeToString(sum[:]) + `"`
})

// acceptsGzip reports whether Accept-Encoding field values take gzip:
// named (or *) with a weight above zero.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(item, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			if coding != "gzip" && coding != "x-gzip" && coding != "*" {
				continue
			}
			q := strings.ReplaceAll(strings.ToLower(params), " ", "")
			if w, ok := strings.CutPrefix(q, "q="); ok && strings.Trim(w, "0.") == "" {
				continue // q=0: refused
			}
			return true
		}
	}
	return false
}

// noneMatch reports whether the If-None-Match field values name etag, by
// the weak comparison RFC 9110 (13.1.2) asks of it: W/"x" names "x" too.
// "*" names any. A malformed list names nothing from where it breaks: the
// document is then sent whole, which is never wrong.
func noneMatch(values []string, etag string) bool {
	for _, v := range values {
		for {
			v = strings.TrimLeft(v, " \t,")
			if v == "" {
				break
			}
			if v[0] == '*' {
				return true
			}
			v = strings.TrimPrefix(v, "W/")
			if len(v) < 2 || v[0] != '"' {
				break
			}
			end := strings.IndexByte(v[1:], '"')
			if end < 0 {
				break
			}
			if v[:end+2] == etag {
				return true
			}
			v = v[end+2:]
		}
	}
	return false
}

// toJSON converts a YAML document to JSON. Mapping keys are strings in
// JSON: an unquoted 200 status key becomes "200".
func toJSON(src []byte) ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("parse openapi.yaml: %w", err)
	}
	v, err := jsonValue(doc)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func jsonValue(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			out[fmt.Sprint(k)] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case string, bool, int, int64, uint64, float64, nil:
		return x, nil
	default:
		return nil, fmt.Errorf("openapi.yaml holds a %T (%v), which JSON cannot hold: quote it", v, v)
	}
}

// Operation is one documented route: a method and a path template.
type Operation struct {
	Method string // upper case
	Path   string // as documented, /api/v1/definitions/{key}
}

// Operations lists the documented routes.
func Operations() ([]Operation, error) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(JSON(), &doc); err != nil {
		return nil, err
	}
	var ops []Operation
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
				ops = append(ops, Operation{Method: strings.ToUpper(method), Path: path})
			}
		}
	}
	return ops, nil
}
