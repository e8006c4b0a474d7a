// Package httpjson is the JSON side of Relais's HTTP surfaces: strict request
// decoding, response encoding, and problem+json errors (DESIGN §8) written
// through one function so every route answers errors the same way.
package httpjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/relais/relais/internal/fault"
	"github.com/relais/relais/internal/jsontree"
	"github.com/relais/relais/internal/pgfault"
)

// ProblemContentType is the media type of every error response.
const ProblemContentType = "application/problem+json"

// StatusClientClosedRequest is the status logged for a request whose client
// disconnected before the answer (nginx's 499): no client ever reads it.
const StatusClientClosedRequest = 499

// Decode reads r's body as one JSON document into a T, refusing unknown
// fields, trailing data, bodies above maxBytes, and strings holding the NUL
// character (see nulStrings). Errors are *fault.Error ready to be written.
func Decode[T any](w http.ResponseWriter, r *http.Request, maxBytes int64) (T, error) {
	body, err := ReadBody(w, r, maxBytes)
	if err != nil {
		var v T
		return v, err
	}
	return decodeBody[T](body)
}

// DecodeOrZero is Decode, except that an empty (or blank) body is the zero T: for a
// route that checks its members itself, so that a client who sent nothing
// learns which member is required rather than that the body is empty.
func DecodeOrZero[T any](w http.ResponseWriter, r *http.Request, maxBytes int64) (T, error) {
	body, err := ReadBody(w, r, maxBytes)
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		var v T
		return v, err
	}
	return decodeBody[T](body)
}

var nullLiteral = []byte("null")

// DecodeBytes is Decode for a body the route has read (ReadBody).
func DecodeBytes[T any](body []byte) (T, error) { return decodeBody[T](body) }

func decodeBody[T any](body []byte) (T, error) {
	var v T
	if err := byteOrderMark(body); err != nil {
		return v, err
	}
	if err := CheckText(body); err != nil {
		return v, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		if shapeErr := shapeError(body, reflect.TypeOf(&v).Elem()); shapeErr != nil {
			return v, shapeErr
		}
		return v, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return v, fault.New(fault.BadRequest, "invalid_json", "the body must hold exactly one JSON document")
	}
	if bytes.Contains(body, nullLiteral) {
		// encoding/json takes null for an object as an empty one: a
		// body, or a batch's item, of null is refused instead.
		if err := shapeError(body, reflect.TypeOf(&v).Elem()); err != nil {
			return v, err
		}
	}
	if bytes.Contains(body, nulEscape) {
		var errs []fault.FieldError
		nulStrings(reflect.ValueOf(v), "", &errs)
		if len(errs) > 0 {
			return v, fault.New(fault.BadRequest, "invalid_json", "the body holds the NUL character (\\u0000), which Relais cannot store").WithErrors(errs)
		}
	}
	return v, nil
}

// ReadBody reads r's body whole, refusing one above maxBytes (413
// body_too_large) or one whose framing is broken (400 invalid_json). A
// body whose connection failed while it was read (the client went away,
// or a shutdown past its timeout closed the connection) is an error that
// WriteError answers as the client's departure, not as bad JSON: nobody
// reads that answer, and its log line should not blame the client's data.
func ReadBody(w http.ResponseWriter, r *http.Request, maxBytes int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
	if err == nil {
		return body, nil
	}
	var mbe *http.MaxBytesError
	var nerr net.Error
	switch {
	case errors.As(err, &mbe):
		return nil, fault.New(fault.TooLarge, "body_too_large", "the request body is larger than %d bytes", maxBytes)
	case r.Context().Err() != nil, errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNRESET), errors.As(err, &nerr):
		return nil, &bodyCut{err: err}
	default:
		return nil, fault.New(fault.BadRequest, "invalid_json", "the request body could not be read: %v", err)
	}
}

// ClientGone answers (499, logged at debug) a request whose failure was
// the client's departure: it went away or its deadline passed while the
// work ran, or its body was cut off. Such a failure is no server fault,
// nobody reads the answer, and an ERROR line would page someone for a
// closed tab. It reports whether it answered; every error writer, the
// Camunda facade's included, asks it first.
func ClientGone(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) bool {
	fe, ok := fault.As(err)
	var cut *bodyCut
	if ok && fe.Kind != fault.Internal || r.Context().Err() == nil && !errors.As(err, &cut) {
		return false
	}
	if logger != nil {
		logger.DebugContext(r.Context(), "request abandoned by the client", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	w.WriteHeader(StatusClientClosedRequest)
	return true
}

// bodyCut is a request body whose connection failed while it was read.
type bodyCut struct{ err error }

func (b *bodyCut) Error() string { return "request body cut off: " + b.err.Error() }
func (b *bodyCut) Unwrap() error { return b.err }

// maxCheckDepth bounds the nesting CheckText follows; encoding/json's
// own limit is 10,000 and refuses deeper documents itself.
const maxCheckDepth = 10_000

// UnstorableText says why PostgreSQL could not store s as text (the NUL
// character, bytes that are not UTF-8), or "" when it can. An address's
// path and parameters, and a form's fields, arrive percent-encoded and may
// hold either; a lookup with one fails in the database.
func UnstorableText(s string) string {
	switch {
	case strings.ContainsRune(s, 0):
		return `the NUL character (\u0000) is not allowed`
	case !utf8.ValidString(s):
		return "holds bytes that are not UTF-8 text"
	}
	return ""
}

// PrintableName is a request field's name as a message may quote it: its
// NUL characters dropped, its bytes that are not UTF-8 replaced.
func PrintableName(name string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(name, "\x00", ""), "?")
}

// CheckText refuses (400 invalid_json, every problem at its pointer) a
// request body whose meaning would be guessed: a string or key holding
// invalid UTF-8 or an escaped lone surrogate (decoders store U+FFFD in
// its place, not what was sent) or a duplicate key (decoders keep the
// last one). Malformed bodies pass: the decoder reports them. Decode
// applies it; routes that read bodies themselves must too.
func CheckText(body []byte) error { return CheckTextAt(body, "", "the body is") }

// CheckTextAt is CheckText for a JSON document carried at pointer inside a
// request (a stream's outputs, sent as bytes): its problems are at
// pointers under it, and subject ("the outputs are") opens the detail.
func CheckTextAt(doc []byte, pointer, subject string) error {
	problems := jsontree.CheckText(doc, maxCheckDepth)
	if len(problems) == 0 {
		return nil
	}
	errs := make([]fault.FieldError, len(problems))
	for i, p := range problems {
		errs[i] = fault.FieldError{Path: pointer + p.Pointer, Message: p.Message}
	}
	return fault.New(fault.BadRequest, "invalid_json", "%s not strict JSON: %d problem(s), first at %q: %s", subject, len(errs), errs[0].Path, errs[0].Message).WithErrors(errs)
}

// CheckBody refuses a request body that is not strict JSON: malformed
// (400 invalid_json with the offset), or refused by CheckText. An empty
// body passes: whether one is needed is the route's business.
func CheckBody(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := byteOrderMark(body); err != nil {
		return err
	}
	if !json.Valid(body) {
		var v json.RawMessage
		err := json.Unmarshal(body, &v)
		if err == nil {
			err = errors.New("malformed JSON")
		}
		return decodeError(err)
	}
	return CheckText(body)
}

// nulEscape is how the NUL character appears in JSON text (a raw NUL byte
// is not valid JSON), so bodies without it skip the search.
var nulEscape = []byte(`\u0000`)

// nulStrings appends an error at the JSON pointer of every string of v (a
// decoded request body) that holds the NUL character, which PostgreSQL
// stores neither in text nor in jsonb; a map key holding it is reported at
// the map. Byte slices are left alone: the json.RawMessage fields of
// requests carry values that are validated against their contract, which
// refuses the character with the pointer (422) as it refuses any invalid
// value (jsontree finds it).
func nulStrings(v reflect.Value, at string, errs *[]fault.FieldError) {
	nul := func(s string) bool { return strings.IndexByte(s, 0) >= 0 }
	switch v.Kind() {
	case reflect.String:
		if nul(v.String()) {
			*errs = append(*errs, fault.FieldError{Path: at, Message: jsontree.ErrNUL.Error()})
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			nulStrings(v.Elem(), at, errs)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			nulStrings(v.Index(i), jsontree.PointerIndex(at, i), errs)
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		reported := false
		for _, k := range keys {
			if nul(k.String()) {
				if !reported {
					*errs = append(*errs, fault.FieldError{Path: at, Message: jsontree.ErrNUL.Error()})
					reported = true
				}
				continue
			}
			nulStrings(v.MapIndex(k), jsontree.Pointer(at, k.String()), errs)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			switch name, promoted, ok := jsonMember(t.Field(i)); {
			case !ok:
			case promoted:
				nulStrings(v.Field(i), at, errs)
			default:
				nulStrings(v.Field(i), jsontree.Pointer(at, name), errs)
			}
		}
	}
}

// maxNamed bounds the unknown members a detail names (errors lists them).
const maxNamed = 10

// shapeError reports every unknown member of a well-formed body (400
// unknown_field), else every value its type refuses (400 invalid_json), each
// with its pointer; nil when the body is not well-formed JSON, which
// decodeError explains.
func shapeError(body []byte, t reflect.Type) error {
	unknown, invalid, ok := shapeProblems(body, t)
	switch {
	case !ok:
		return nil
	case len(unknown) > 0:
		var names []string
		for _, u := range unknown[:min(len(unknown), maxNamed)] {
			// With the member meant, when there is one.
			names = append(names, u.Path+strings.TrimPrefix(u.Message, "unknown field"))
		}
		if len(unknown) > maxNamed {
			names = append(names, fmt.Sprintf("… (%d in all)", len(unknown)))
		}
		return fault.New(fault.BadRequest, "unknown_field", "unknown field(s): %s", strings.Join(names, ", ")).WithErrors(unknown)
	case len(invalid) > 0:
		return fault.New(fault.BadRequest, "invalid_json", "%d invalid value(s)", len(invalid)).WithErrors(invalid)
	}
	return nil
}

// byteOrderMark refuses a body that starts with U+FEFF, which Windows
// tools write before UTF-8 text: JSON forbids it (RFC 8259 §8.1), and the
// decoder's "invalid character 'ï'" did not say what to remove.
func byteOrderMark(body []byte) error {
	// White space before it too: a template's line break, say.
	body = bytes.TrimLeft(body, " \t\r\n")
	switch {
	case bytes.HasPrefix(body, []byte("\xef\xbb\xbf")):
		return fault.New(fault.BadRequest, "invalid_json", "the body starts with a byte order mark (U+FEFF), which JSON does not allow: send it without (PowerShell's Out-File and Notepad add one; UTF-8 without BOM)")
	case bytes.HasPrefix(body, []byte("\xff\xfe")), bytes.HasPrefix(body, []byte("\xfe\xff")):
		return fault.New(fault.BadRequest, "invalid_json", "the body is UTF-16 (it starts with UTF-16's byte order mark): send it as UTF-8 (Windows PowerShell 5.1's Out-File writes UTF-16 unless given -Encoding utf8)")
	}
	return nil
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return fault.New(fault.BadRequest, "invalid_json", "the request body is empty")
	case errors.As(err, &syn):
		msg := err.Error()
		if strings.Contains(msg, "invalid character 'N'") || strings.Contains(msg, "invalid character 'I'") {
			// NaN, Infinity: what Python's json.dumps writes for a float
			// that is not a number; None: a Python value printed, not
			// encoded.
			msg += " (NaN, Infinity and None are not JSON: send a number or null; Python's json.dumps writes NaN and Infinity unless given allow_nan=False)"
		}
		return fault.New(fault.BadRequest, "invalid_json", "malformed JSON at byte %d: %s", syn.Offset, msg)
	case errors.As(err, &typ):
		path := "/" + strings.ReplaceAll(typ.Field, ".", "/")
		if typ.Field == "" {
			path = ""
		}
		return fault.New(fault.BadRequest, "invalid_json", "wrong JSON type").WithErrors([]fault.FieldError{{Path: path, Message: fmt.Sprintf("must be %s, not %s", jsonKind(typ.Type.String()), typ.Value)}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return fault.New(fault.BadRequest, "unknown_field", "unknown field %q", name).WithErrors([]fault.FieldError{{Path: "/" + name, Message: "unknown field"}})
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fault.New(fault.BadRequest, "invalid_json", "truncated JSON")
	default:
		// Custom UnmarshalJSON errors (durations, enums) land here; their
		// text is ours and safe to show.
		return fault.New(fault.BadRequest, "invalid_json", "%v", err)
	}
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	default:
		return "an object"
	}
}

// Encode writes v as JSON with the status.
func Encode(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// A value that cannot be encoded is a bug of this process: the
		// client gets the problem any internal error gets, the log the
		// cause (no logger reaches here, the default one does).
		slog.Error("internal error: encode answer", "type", fmt.Sprintf("%T", v), "err", err)
		body, _ := json.Marshal(map[string]any{"type": "urn:relais:problem:internal", "title": http.StatusText(http.StatusInternalServerError),
			"status": http.StatusInternalServerError, "code": "internal", "detail": "an internal error occurred; it has been logged"})
		h := w.Header()
		h.Set("Content-Type", ProblemContentType)
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(append(body, '\n'))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	// A browser must not read an answer that quotes what a client sent as
	// anything but JSON.
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// Status maps a fault kind to its HTTP status.
func Status(k fault.Kind) int {
	switch k {
	case fault.BadRequest:
		return http.StatusBadRequest
	case fault.Unauthorized:
		return http.StatusUnauthorized
	case fault.Forbidden:
		return http.StatusForbidden
	case fault.NotFound:
		return http.StatusNotFound
	case fault.MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case fault.Conflict:
		return http.StatusConflict
	case fault.TooLarge:
		return http.StatusRequestEntityTooLarge
	case fault.Unprocessable:
		return http.StatusUnprocessableEntity
	case fault.TooManyRequests:
		return http.StatusTooManyRequests
	case fault.Unavailable:
		return http.StatusServiceUnavailable
	case fault.Timeout:
		return http.StatusRequestTimeout
	case fault.PreconditionFailed:
		return http.StatusPreconditionFailed
	default:
		return http.StatusInternalServerError
	}
}

// Problem is the problem+json document (RFC 9457) Relais writes.
type Problem struct {
	Type   string             `json:"type"`
	Title  string             `json:"title"`
	Status int                `json:"status"`
	Detail string             `json:"detail,omitempty"`
	Code   string             `json:"code"`
	Errors []fault.FieldError `json:"errors,omitempty"`
}

// WriteError writes err as problem+json. Errors that are not *fault.Error are
// internal: logged with their detail and answered with a generic message,
// because their text may carry anything (SQL, payload fragments).
func WriteError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	if cut := pgfault.CutShort(r.Context()); cut != nil {
		err = cut
	}
	if ClientGone(w, r, logger, err) {
		return
	}
	fe := answerable(r, logger, err)
	NoteProblem(r.Context(), fe.Code)
	status, doc := ProblemOf(fe)
	if id := middleware.GetReqID(r.Context()); id != "" {
		// What to quote to an operator, who finds the log line by it.
		doc["http_request_id"] = id
	}
	if fe.RetryAfter > 0 {
		secs := int(fe.RetryAfter.Seconds() + 0.999)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	body, _ := json.Marshal(doc)
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

// answerable is the fault err is answered as: itself, unavailable for a
// lost database, or internal (logged, its text kept from the client) for
// anything else.
func answerable(r *http.Request, logger *slog.Logger, err error) *fault.Error {
	fe, ok := fault.As(err)
	if !ok && (pgfault.Lost(err) || pgfault.TimedOut(err)) {
		// The engine turns these into the fault below; an error that
		// reached here another way (a lookup outside the engine) is
		// answered alike.
		fe, ok = pgfault.Unavailable(err), true
	}
	if !ok || fe.Kind == fault.Internal {
		if logger != nil {
			logger.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		fe = fault.New(fault.Internal, "internal", "an internal error occurred; it has been logged")
	}
	LogUnavailable(r.Context(), logger, fe, "method", r.Method, "path", r.URL.Path)
	return fe
}

// LogUnavailable writes the "dependency unavailable" line of a refusal
// for a lost dependency (fe unavailable with its cause), through the one
// throttle every protocol shares: an outage refuses REST calls and the
// worker protocol's alike, and one line per period says so for both.
// where names the call (method and path, or the procedure).
func LogUnavailable(ctx context.Context, logger *slog.Logger, fe *fault.Error, where ...any) {
	if fe.Kind != fault.Unavailable || fe.Cause == nil || logger == nil {
		return
	}
	if held, ok := unavailableLines.allow(time.Now()); ok {
		logger.WarnContext(ctx, "dependency unavailable", append(where, "code", fe.Code, "err", fe.Cause, "held_back", held)...)
	}
}

// unavailableLines lets one "dependency unavailable" line through every
// unavailableEvery: an outage fails every request alike (QA counted two
// WARN lines per refused request, 4,600 of each in 22 s), and each request
// keeps its access line with its code.
var unavailableLines = &throttle{every: unavailableEvery}

const unavailableEvery = 10 * time.Second

// throttle lets a line through at most once per every.
type throttle struct {
	every time.Duration
	mu    sync.Mutex
	last  time.Time
	held  int
}

// allow reports whether a line may be written at now, and how many were
// held back since the last one, in the period after it: those of a burst
// that ended are not carried to the next one (an outage an hour later
// would report the last one's tail as its own).
func (t *throttle) allow(now time.Time) (held int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.last.IsZero() && now.Sub(t.last) < t.every {
		t.held++
		return 0, false
	}
	held, t.held = t.held, 0
	if now.Sub(t.last) >= 2*t.every {
		held = 0
	}
	t.last = now
	return held, true
}

// MaxProblemErrors bounds the errors a problem lists; errors_omitted
// counts the rest.
const MaxProblemErrors = 100

// ProblemOf is the problem+json document of fe and its status, for a
// response or for one item of a batch answer.
func ProblemOf(fe *fault.Error) (int, map[string]any) {
	status := Status(fe.Kind)
	doc := map[string]any{
		"type":   "urn:relais:problem:" + fe.Code,
		"title":  http.StatusText(status),
		"status": status,
		"code":   fe.Code,
	}
	if fe.Detail != "" {
		doc["detail"] = fe.Detail
	}
	if len(fe.Errors) > MaxProblemErrors {
		// A 1 MB body of 80,000 unknown keys must not get a 5 MB answer.
		doc["errors"] = fe.Errors[:MaxProblemErrors]
		doc["errors_omitted"] = len(fe.Errors) - MaxProblemErrors
	} else if len(fe.Errors) > 0 {
		doc["errors"] = fe.Errors
	}
	for k, v := range fe.Extra {
		if _, taken := doc[k]; !taken {
			doc[k] = v
		}
	}
	return status, doc
}

// ItemProblemOf is the problem of item index of a batch answer, err
// answered as WriteError would: its pointers point into the batch's body
// (/items/3/outputs/crm_id), as a refused item's do in every batch route.
func ItemProblemOf(r *http.Request, logger *slog.Logger, err error, index int) (int, map[string]any) {
	fe := answerable(r, logger, err)
	status, doc := ProblemOf(fe)
	if len(fe.Errors) > 0 {
		prefix := "/items/" + strconv.Itoa(index)
		listed := fe.Errors[:min(len(fe.Errors), MaxProblemErrors)] // as ProblemOf bounds them
		errs := make([]fault.FieldError, len(listed))
		for i, e := range listed {
			errs[i] = fault.FieldError{Path: prefix + e.Path, Message: e.Message}
		}
		doc["errors"] = errs
	}
	return status, doc
}

// ErrorHandler turns a handler that returns an error into an http.Handler
// that writes that error as problem+json.
func ErrorHandler(logger *slog.Logger, h func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			WriteError(w, r, logger, err)
		}
	})
}

// QueryProblem says what makes a query string unreadable, or "" when
// every parameter in it can be read: url.Values drops what it cannot read
// and goes on, a filter then ignored and a dry run applied for real.
func QueryProblem(raw string) string {
	if _, err := url.ParseQuery(raw); err == nil {
		return ""
	}
	for _, part := range strings.Split(raw, "&") {
		if strings.Contains(part, ";") {
			return "holds a semicolon: separate parameters with &, and write a semicolon in a value as %3B"
		}
		if _, err := url.QueryUnescape(part); err != nil {
			if len(part) > 60 {
				part = part[:60] + "…"
			}
			return fmt.Sprintf("holds a percent sign not followed by two hexadecimal digits in %q: write a percent sign in a value as %%25", PrintableName(part))
		}
	}
	return "cannot be read as name=value pairs"
}

// UnknownHint adds to an unknown_field refusal the hint for the depth of
// its first unknown member (its pointer's segments) that is no misspelling
// of a member the route takes (those are told the member they mean): a
// request whose members belong one level down ({"crm_id": …} where
// {"outputs": {"crm_id": …}} is meant) is told where they go.
func UnknownHint(err error, hints map[int]string) error {
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Code != "unknown_field" {
		return err
	}
	for _, e := range fe.Errors {
		if hint, ok := hints[strings.Count(e.Path, "/")]; ok && e.Message == "unknown field" {
			fe.Detail += ": " + hint
			return fe
		}
	}
	return err
}
