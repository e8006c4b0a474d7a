package contracts

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMask(t *testing.T) {
	t.Parallel()
	c := mustParseWorking(t, richWorking).Inputs
	got := string(c.Mask([]byte(richPayload)))
	want := `{"address":{"city":"Paris","country":"FR","postcode":"75002","street":"12 rue de la Paix"},` +
		`"annual_revenue":{"$masked":"sensitive"},"api_key":{"$masked":"secret"},"card":{"$masked":"sensitive"},` +
		`"company_name":"Acme Industries SAS","contact_email":{"$masked":"sensitive"},` +
		`"contacts":[{"email":"jane.doe@acme.example.com","name":"Jane Doe","phone":{"$masked":"sensitive"}},{"name":"John Roe","phone":{"$masked":"sensitive"}}],` +
		`"crm_id":"ACM-004211","employees":420,"founded":"1998-04-12","is_customer":true,"last_contact":"2024-05-01T09:30:00Z",` +
		`"notes":"Met at the Lyon trade fair; wants a demo in June.","owner":{"id":17,"name":"Sales EMEA"},"priority":2,` +
		`"request_id":"3f2b8c1e-6a4d-4e7b-9c0a-1d2e3f4a5b6c","scores":[88.5,92,79.25],"tags":["manufacturing","b2b","europe"],` +
		`"tier":"gold","website":"https://acme.example.com/about"}`
	if got != want {
		t.Fatalf("Mask:\n got %s\nwant %s", got, want)
	}
}

func TestMaskEdgeCases(t *testing.T) {
	t.Parallel()
	c := mustParseContract(t, `{"fields":[
	  {"name":"a","type":"text"},
	  {"name":"o","type":"object","fields":[{"name":"s","type":"text","classification":"secret"},{"name":"n","type":"integer"}]},
	  {"name":"keys","type":"list","items":{"type":"text","classification":"secret"}},
	  {"name":"whole","type":"list","classification":"sensitive","items":{"type":"integer"}}
	]}`)
	tests := []struct{ name, in, want string }{
		{"unknown properties dropped", `{"a":"x","password":"hunter2","o":{"n":1,"extra":"leak"}}`, `{"a":"x","o":{"n":1}}`},
		{"secret list items", `{"keys":["k1","k2"]}`, `{"keys":[{"$masked":"secret"},{"$masked":"secret"}]}`},
		// Stored whole by Split, a marker in its place (one written
		// before it said the items' class says "normal").
		{"stored list of secret items", `{"keys":{"$masked":"normal"}}`, `{"keys":{"$masked":"secret"}}`},
		{"object in a list of secret items", `{"keys":{"k":"v"}}`, `{}`},
		{"sensitive list whole", `{"whole":[1,2,3]}`, `{"whole":{"$masked":"sensitive"}}`},
		{"nested secret", `{"o":{"s":"tok","n":2}}`, `{"o":{"n":2,"s":{"$masked":"secret"}}}`},
		{"wrong-typed secret still masked", `{"o":{"s":{"deep":"tok"}}}`, `{"o":{"s":{"$masked":"secret"}}}`},
		{"structure in a text slot dropped", `{"a":{"secret":"x"}}`, `{}`},
		{"object slot holding a scalar", `{"o":"plain"}`, `{"o":"plain"}`},
		{"invalid json", `{"a":`, `{}`},
		{"not an object", `["a"]`, `{}`},
		{"escaping kept", `{"a":"<b> & \"q\""}`, `{"a":"<b> & \"q\""}`},
	}
	for _, tt := range tests {
		if got := string(c.Mask([]byte(tt.in))); got != tt.want {
			t.Errorf("%s: Mask(%s):\n got %s\nwant %s", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestReveal(t *testing.T) {
	t.Parallel()
	c := mustParseContract(t, `{"fields":[
	  {"name":"a","type":"text"},
	  {"name":"email","type":"text","classification":"sensitive"},
	  {"name":"card","type":"object","classification":"sensitive","fields":[
	    {"name":"holder","type":"text"},{"name":"token","type":"text","classification":"secret"},
	    {"name":"pins","type":"list","items":{"type":"integer","classification":"secret"}}]},
	  {"name":"phones","type":"list","items":{"type":"text","classification":"sensitive"}}
	]}`)
	doc := `{"a":"x","email":"jane@example.com","card":{"holder":"Jane","token":"tok","pins":[1,2],"extra":"leak"},
	  "phones":["+33 1","+33 2"]}`
	tests := []struct {
		pointer, want string
		ok            bool
	}{
		{"/email", `"jane@example.com"`, true},
		{"/card", `{"holder":"Jane","pins":[{"$masked":"secret"},{"$masked":"secret"}],"token":{"$masked":"secret"}}`, true},
		{"/card/holder", `"Jane"`, true},
		{"/card/token", `{"$masked":"secret"}`, true},
		{"/phones/1", `"+33 2"`, true},
		{"/a", `"x"`, true},
		{"/phones/5", "", false},
		{"/phones/*", "", false},
		{"/card/extra", "", false},
		{"/nowhere", "", false},
		{"", "", false},
		{"email", "", false},
	}
	for _, tt := range tests {
		got, ok := c.Reveal(json.RawMessage(doc), tt.pointer)
		if ok != tt.ok || string(got) != tt.want {
			t.Errorf("Reveal(%q) = %s, %v; want %s, %v", tt.pointer, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSplitMerge(t *testing.T) {
	t.Parallel()
	c := mustParseContract(t, `{"fields":[
	  {"name":"name","type":"text"},
	  {"name":"card","type":"object","fields":[{"name":"holder","type":"text"},{"name":"token","type":"text","classification":"secret"}]},
	  {"name":"cards","type":"list","items":{"type":"object","fields":[{"name":"last4","type":"text"},{"name":"token","type":"text","classification":"secret"}]}},
	  {"name":"pins","type":"list","items":{"type":"integer","classification":"secret"}},
	  {"name":"vault","type":"object","classification":"secret","fields":[{"name":"k","type":"text"}]},
	  {"name":"phone","type":"text","classification":"sensitive"}
	]}`)
	value := `{"name":"Acme","card":{"holder":"J","token":"tok_1"},"cards":[{"last4":"4242","token":"tok_a"},{"last4":"0005"}],
	  "pins":[1234,5678],"vault":{"k":"v"},"phone":"+33 1","extra":"kept"}`
	public, secrets := c.Split([]byte(value))
	wantPublic := `{"card":{"holder":"J"},"cards":[{"last4":"4242"},{"last4":"0005"}],"extra":"kept","name":"Acme","phone":"+33 1"}`
	if string(public) != wantPublic {
		t.Errorf("Split public:\n got %s\nwant %s", public, wantPublic)
	}
	wantSecrets := map[string]json.RawMessage{
		"/card/token":    json.RawMessage(`"tok_1"`),
		"/cards/0/token": json.RawMessage(`"tok_a"`),
		"/pins":          json.RawMessage(`[1234,5678]`),
		"/vault":         json.RawMessage(`{"k":"v"}`),
	}
	if !reflect.DeepEqual(secrets, wantSecrets) {
		t.Errorf("Split secrets:\n got %s\nwant %s", mustJSON(t, secrets), mustJSON(t, wantSecrets))
	}
	for _, s := range []string{"tok_1", "tok_a", "1234", `"k"`} {
		if strings.Contains(string(public), s) {
			t.Errorf("public part contains secret %s", s)
		}
	}
	merged, err := Merge(public, secrets)
	if err != nil {
		t.Fatalf("Merge: %v", err)
	}
	if !jsonEqual(t, merged, []byte(value)) {
		t.Fatalf("Merge(Split(v)):\n got %s\nwant %s", merged, value)
	}

	// Nothing secret: no map at all, value intact.
	pub, sec := c.Split([]byte(`{"name":"x"}`))
	if sec != nil || string(pub) != `{"name":"x"}` {
		t.Errorf("Split without secrets: got %s %v, want the value and nil", pub, sec)
	}
	if pub, sec := c.Split([]byte(`nope`)); string(pub) != `{}` || sec != nil {
		t.Errorf("Split(invalid): got %s %v, want {} and nil", pub, sec)
	}
}

// SplitFrom skips decoding when the contract protects nothing at min, and
// only then: a classification deep in list items, or sensitive fields
// split from sensitive up, still take their values out.
func TestSplitFromTakesTheShortPathOnlyWhenNothingIsProtected(t *testing.T) {
	t.Parallel()
	plain := mustParseContract(t, `{"fields":[{"name":"name","type":"text"},
	  {"name":"rows","type":"list","items":{"type":"object","fields":[{"name":"v","type":"integer"}]}}]}`)
	value := `{ "rows":[{"v":1}], "name":"a\u00e9" }`
	if pub, sec := plain.SplitFrom([]byte(value), ClassSensitive); string(pub) != value || sec != nil {
		t.Errorf("nothing protected: got %s %v, want the value as sent and nil", pub, sec)
	}
	for _, bad := range []string{`nope`, `[1]`, `{"name":`, ``} {
		if pub, sec := plain.SplitFrom([]byte(bad), ClassSensitive); string(pub) != `{}` || sec != nil {
			t.Errorf("SplitFrom(%q): got %s %v, want {} and nil", bad, pub, sec)
		}
	}

	deep := mustParseContract(t, `{"fields":[{"name":"rows","type":"list","items":{"type":"list",
	  "items":{"type":"object","fields":[{"name":"pin","type":"integer","classification":"sensitive"}]}}}]}`)
	pub, sec := deep.SplitFrom([]byte(`{"rows":[[{"pin":1}]]}`), ClassSensitive)
	if string(pub) != `{"rows":[[{}]]}` || string(sec["/rows/0/0/pin"]) != `1` {
		t.Errorf("protected in nested items: got %s %s", pub, mustJSON(t, sec))
	}
	// Sensitive is below secret: split from secret, it stays.
	if pub, sec := deep.SplitFrom([]byte(`{"rows":[[{"pin":1}]]}`), ClassSecret); string(pub) != `{"rows":[[{"pin":1}]]}` || sec != nil {
		t.Errorf("sensitive split from secret: got %s %v, want it kept", pub, sec)
	}
}

func TestMergeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		public  string
		secrets map[string]json.RawMessage
	}{
		{"invalid public", `{`, nil},
		{"invalid secret", `{}`, map[string]json.RawMessage{"/a": json.RawMessage(`{`)}},
		{"missing parent", `{}`, map[string]json.RawMessage{"/a/b": json.RawMessage(`1`)}},
		{"index out of range", `{"a":[]}`, map[string]json.RawMessage{"/a/0/b": json.RawMessage(`1`)}},
		{"bad pointer", `{}`, map[string]json.RawMessage{"a": json.RawMessage(`1`)}},
	}
	for _, tt := range tests {
		if got, err := Merge(json.RawMessage(tt.public), tt.secrets); err == nil {
			t.Errorf("%s: Merge = %s, nil; want an error", tt.name, got)
		} else if !strings.HasPrefix(err.Error(), "contracts: merge:") {
			t.Errorf("%s: error %q, want it prefixed with contracts: merge:", tt.name, err)
		}
	}
	got, err := Merge(json.RawMessage(`{"a":{}}`), map[string]json.RawMessage{"/a/x~1y": json.RawMessage(`"s"`)})
	if err != nil || string(got) != `{"a":{"x/y":"s"}}` {
		t.Errorf("Merge with escaped pointer: got %s %v, want {\"a\":{\"x/y\":\"s\"}}", got, err)
	}
}

func TestProtectedStringsAndScrub(t *testing.T) {
	t.Parallel()
	c := mustParseWorking(t, richWorking).Inputs
	got := c.ProtectedStrings([]byte(richPayload))
	want := []string{
		"jane.doe@acme.example.com", "sk_live_51HxQ2eZvKYlo2C", "+33 1 23 45 67 89", "+33 6 98 76 54 32",
		"tok_9f8e7d6c5b4a", "12500000.50", "ACME SAS", "12/27",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ProtectedStrings:\n got %q\nwant %q", got, want)
	}
	for _, s := range got {
		if s == "Acme Industries SAS" || s == "Paris" {
			t.Errorf("normal value %q reported as protected", s)
		}
	}

	msg := `crm rejected {"email":"jane.doe@acme.example.com","key":"sk_live_51HxQ2eZvKYlo2C","rev":12500000.50}`
	wantMsg := `crm rejected {"email":"[redacted]","key":"[redacted]","rev":[redacted]}`
	if got := Scrub(msg, got); got != wantMsg {
		t.Errorf("Scrub:\n got %s\nwant %s", got, wantMsg)
	}

	// Longest first: a secret containing another is redacted whole.
	if got := Scrub("token abc123 and abc", []string{"abc", "abc123", "", "abc"}); got != "token [redacted] and [redacted]" {
		t.Errorf("Scrub overlapping: got %q", got)
	}
	if got := Scrub("nothing here", nil); got != "nothing here" {
		t.Errorf("Scrub without protected strings: got %q", got)
	}

	// Escaped forms are included so that secrets inside JSON text go too.
	q := mustParseContract(t, `{"fields":[{"name":"p","type":"text","classification":"secret"}]}`)
	ps := q.ProtectedStrings([]byte(`{"p":"a\"b"}`))
	if !reflect.DeepEqual(ps, []string{`a\"b`, `a"b`}) {
		t.Errorf("ProtectedStrings with quote: got %q, want raw and escaped forms", ps)
	}
	if got := Scrub(`body {"p":"a\"b"}`, ps); got != `body {"p":"[redacted]"}` {
		t.Errorf("Scrub of escaped form: got %s", got)
	}
	if ps := q.ProtectedStrings([]byte(`not json`)); ps != nil {
		t.Errorf("ProtectedStrings(invalid): got %q, want nil", ps)
	}
}

// A protected date-time's date and time of day are protected apart too:
// a message writes them so as often as whole (security QA: "when
// 2026-03-04 05:06:07" kept the time).
func TestProtectedDatetimeParts(t *testing.T) {
	t.Parallel()
	c := mustParseContract(t, `{"fields":[{"name":"at","type":"datetime","classification":"sensitive"},{"name":"seen","type":"datetime"}]}`)
	ps := c.ProtectedStrings([]byte(`{"at":"2026-03-04T05:06:07Z","seen":"2026-01-02T10:11:12Z"}`))
	for _, msg := range []string{"when 2026-03-04 05:06:07", "at 05:06:07 on 2026-03-04", "2026-03-04T05:06:07Z"} {
		if got := Scrub(msg, ps); strings.Contains(got, "05:06") || strings.Contains(got, "03-04") {
			t.Errorf("Scrub(%q) = %q: a part of the protected date-time is left", msg, got)
		}
	}
	if got := Scrub("seen 2026-01-02 10:11:12", ps); got != "seen 2026-01-02 10:11:12" {
		t.Errorf("a normal date-time was scrubbed: %q", got)
	}
}

// A service that quotes a protected value in its own JSON or URL escapes
// it: Python's json.dumps writes é as \u00e9 and Ω as \u03a9, Go's writes
// < as \u003c, PHP's writes / as \/, a URL percent-encodes. Every such
// spelling is scrubbed, not only the raw value.
func TestScrubCatchesEscapedSpellings(t *testing.T) {
	t.Parallel()
	secret, header := "tok_café_SECRET_Ωmega<1>/x", `key"with/quote\slash`
	for _, msg := range []string{
		`{"msg": "I saw tok_caf\u00e9_SECRET_\u03a9mega<1>/x"}`,
		`{"msg": "I saw tok_caf\u00E9_SECRET_\u03A9mega<1>/x"}`,
		`{"msg":"I saw tok_café_SECRET_Ωmega\u003c1\u003e/x"}`,
		`{"msg":"I saw tok_café_SECRET_Ωmega<1>\/x"}`,
		`GET /cb?t=tok_caf%C3%A9_SECRET_%CE%A9mega%3C1%3E%2Fx`,
		`header key\"with/quote\\slash`,
		`header key\"with\/quote\\slash`,
	} {
		if got := Scrub(msg, []string{secret, header}); strings.Contains(got, "SECRET") || strings.Contains(got, "quote") {
			t.Errorf("Scrub(%s) = %s: a spelling of the value is left", msg, got)
		}
	}
	// An error page escapes what it quotes as HTML; a form encodes a
	// space as +.
	for _, c := range []struct{ msg, value string }{
		{`<p>Cardholder Ren&eacute;e O&#x27;Brien &amp; Sons rejected</p>`, "Renée O'Brien & Sons"},
		{`<p>card tok_Zq9&#39;Xy&amp;7&lt;secret&gt;</p>`, "tok_Zq9'Xy&7<secret>"},
		{`<p>card tok_Zq9&apos;Xy&#38;7&#x3C;secret&#62;</p>`, "tok_Zq9'Xy&7<secret>"},
		{`posted street=14+rue+des+Lilas+Cachees&city=Paris`, "14 rue des Lilas Cachees"},
		{`call +33+6+12+34+56+78 failed`, "+33 6 12 34 56 78"},
		{"<td>14&nbsp;rue&nbsp;des&nbsp;Lilas</td>", "14 rue des Lilas"},
		{"<td>14\u00a0rue\u00a0des\u00a0Lilas</td>", "14 rue des Lilas"},
		{`holder O&amp;#39;Brien &amp;amp; Sons`, "O'Brien & Sons"},
		{`holder O&#39Brien &amp Sons`, "O'Brien & Sons"},
	} {
		if got := Scrub(c.msg, []string{c.value}); strings.Contains(got, "Brien") || strings.Contains(got, "secret") ||
			strings.Contains(got, "Lilas") || strings.Contains(got, "34") || !strings.Contains(got, Redacted) {
			t.Errorf("Scrub(%s) = %s: a spelling of %q is left", c.msg, got, c.value)
		}
	}
	for _, msg := range []string{`&amp; &bogus; & done +1`, `R&D says a+b > c & d &amp; e; x=1+2; AT&T; &copy; C++`, "a\u00a0b &amp;amp;"} {
		if got := Scrub(msg, []string{"secret"}); got != msg {
			t.Errorf("Scrub(%s) = %s, want it unchanged", msg, got)
		}
	}
	if got := Scrub(`&amp; &bogus; & done +1`, []string{"secret"}); got != `&amp; &bogus; & done +1` {
		t.Errorf("references that are not the value: %s", got)
	}
	if got := Scrub(`astral \ud83d\ude00 here`, []string{"😀"}); got != "astral [redacted] here" {
		t.Errorf("an astral rune as a surrogate pair: %s", got)
	}
	// Other encoders' habits: Gson (= ' as \u003d \u0027), .NET (+ as
	// \u002B), Python (DEL as \u007f, \b \f), lower-case percent-encoding,
	// Python's quote() leaving / alone.
	b64 := "c2VjcmV0+/K=="
	for _, msg := range []string{
		`{"k":"c2VjcmV0\u002B\/K\u003d\u003D"}`,
		`{"k":"c2VjcmV0+\/K\u003d="}`,
		`cb?k=c2VjcmV0%2b%2fK%3d%3D`,
		`cb?k=c2VjcmV0%2B/K%3D%3D`,
	} {
		if got := Scrub(msg, []string{b64}); strings.Contains(got, "c2VjcmV0") {
			t.Errorf("Scrub(%s) = %s: the base64 value is left", msg, got)
		}
	}
	if got := Scrub(`"a\u007fb\bc\fd"`, []string{"a\x7fb\bc\fd"}); got != `"[redacted]"` {
		t.Errorf("control characters escaped: %s", got)
	}
	// Escapes that are not the value, or not escapes, are left alone.
	for _, msg := range []string{`100% done \u12 %zz \q`, `{"other":"\u00e9t\u00e9"}`} {
		if got := Scrub(msg, []string{"secret"}); got != msg {
			t.Errorf("Scrub(%s) = %s, want it unchanged", msg, got)
		}
	}
}

// A service quoting a value cut short (a truncated echo, a card shown by
// its last digits) or base64-encoded leaves no piece of it of half its
// length or more; shorter stretches, common to many words, stay.
func TestScrubCatchesPiecesAndEncodings(t *testing.T) {
	t.Parallel()
	const secret = "CARDTOKEN-ZYXW-9876"
	for _, msg := range []string{
		"partial=CARDTOKEN-ZYXW-987 end",
		"shown as ...N-ZYXW-9876 here",
		"lower cardtoken-zyxw-98 end",
		"b64=" + base64.StdEncoding.EncodeToString([]byte(secret)),
		"b64url=" + base64.RawURLEncoding.EncodeToString([]byte(secret)),
		`{"q":"CARDTOKEN\u002dZYXW"}`,
	} {
		got := Scrub(msg, []string{secret})
		if !strings.Contains(got, Redacted) || strings.Contains(strings.ToLower(got), "zyxw") || strings.Contains(got, "Q0FSRFRPS0VO") {
			t.Errorf("Scrub(%q) = %q: a piece or encoding of the value is left", msg, got)
		}
	}
	for _, msg := range []string{"CARDTOKE is a word", "ZYXW-9876 alone is short", "no value here"} {
		if got := Scrub(msg, []string{secret}); got != msg {
			t.Errorf("Scrub(%q) = %q, want it unchanged (under half the value)", msg, got)
		}
	}
	// A cut falls on a whole character: the rest stays valid UTF-8.
	if got := Scrub("quoted: éléphant-rosé-ß", []string{"éléphant-rosé-ßxyz"}); !utf8.ValidString(got) || strings.Contains(got, "phant") {
		t.Errorf("a piece of a value with accents: %q", got)
	}
	// A short value is looked for whole only.
	if got := Scrub("code 1234 and 12345678", []string{"12345"}); got != "code 1234 and [redacted]678" {
		t.Errorf("a short value: %q", got)
	}
	// A piece of a value that holds a space takes the message's space
	// around it no more than its letters (push QA).
	for msg, want := range map[string]string{
		"invalid token HEADERSECRET-abc123": "invalid token [redacted]",
		"Bearer HEADERSEC rest":             "[redacted] rest",
	} {
		if got := Scrub(msg, []string{"Bearer HEADERSECRET-abc123"}); got != want {
			t.Errorf("Scrub(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestScrubIgnoresLetterCase: a service that lower-cases an email address
// (or upper-cases a reference) as it quotes it does not unmask it, whatever
// the script, escaped or not; what is around it keeps its case.
func TestScrubIgnoresLetterCase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ msg, value, want string }{
		{"variants: GINA.PRIVATE@SCRUB.EXAMPLE | gina.private@scrub.example | Gina.Private@scrub.example", "Gina.Private@scrub.example",
			"variants: [redacted] | [redacted] | [redacted]"},
		{"Réf ÉLODIE-ΩMEGA refusée", "élodie-ωmega", "Réf [redacted] refusée"},
		{`{"m":"JOS\u00c9 FERN\u00C1NDEZ"}`, "José Fernández", `{"m":"[redacted]"}`},
		{"cb?n=JOS%C3%89", "josé", "cb?n=[redacted]"},
		// A letter whose lower case has another length keeps its case and
		// leaves the rest of the message in place.
		{"\u212a-code, k-code", "k-code", "\u212a-code, [redacted]"},
		{"bad \xff byte ABC", "abc", "bad \xff byte [redacted]"},
		// Accents composed or decomposed are one spelling to a reader:
		// macOS file names, some Java services, write them decomposed.
		{"who=Zoe\u0308 U\u0308nal, again ZOE\u0308", "Zoë Ünal", "who=[redacted], again ZOE\u0308"},
		{"who=Zoë Ünal", "Zoe\u0308 U\u0308nal", "who=[redacted]"},
		{`{"m":"Zoe\u0308 U\u0308nal"}`, "Zoë Ünal", `{"m":"[redacted]"}`},
	} {
		if got := Scrub(tc.msg, []string{tc.value}); got != tc.want {
			t.Errorf("Scrub(%q, %q) = %q, want %q", tc.msg, tc.value, got, tc.want)
		}
	}
}

// TestScrubShortValuesOnlyAsWords: a value of a few bytes is redacted
// where it stands as a word, not inside other words, where the pattern of
// its redactions would spell it out; a longer one is redacted inside
// words too (a token glued to a prefix).
func TestScrubShortValuesOnlyAsWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		message string
		values  []string
		want    string
	}{
		{"lab system timeout: request for the patient record took too long; blood group O.", []string{"O"},
			"lab system timeout: request for the patient record took too long; blood group [redacted]."},
		{"label LABEL-PUBLIC-2 refused for AB", []string{"AB"}, "label LABEL-PUBLIC-2 refused for [redacted]"},
		{"group=AB;", []string{"AB"}, "group=[redacted];"},
		{"ab", []string{"AB"}, "[redacted]"},
		{"age 42 and 142", []string{"42"}, "age [redacted] and 142"},
		{"Éva or Évariste", []string{"Éva"}, "[redacted] or [redacted]riste"},
		{"顧客王小明様の注文が失敗しました", []string{"王小明"}, "顧客[redacted]様の注文が失敗しました"},
		{"cvv737 rejected", []string{"737"}, "cvv[redacted] rejected"},
		{"time-out, O-ring, o'clock, a-o, group O.", []string{"O"}, "time-out, O-ring, o'clock, a-o, group [redacted]."},
		{"blood: O - see notes", []string{"O"}, "blood: [redacted] - see notes"},
		{"+33 and 1+33", []string{"+33"}, "[redacted] and 1[redacted]"},
		{"token=xtok1y", []string{"tok1"}, "token=x[redacted]y"},
	} {
		if got := Scrub(tc.message, tc.values); got != tc.want {
			t.Errorf("Scrub(%q, %q) = %q, want %q", tc.message, tc.values, got, tc.want)
		}
	}
}

// LacksFields names the declared pointers the inputs do not have, in the
// order given: a missing member, a member of a scalar, one inside a list.
func TestLacksFields(t *testing.T) {
	t.Parallel()
	c := mustParseWorking(t, richWorking).Inputs
	got := c.LacksFields([]string{"/company_name", "/address/city", "/region", "/company_name/first", "/contacts/name"})
	if want := []string{"/region", "/company_name/first", "/contacts/name"}; !reflect.DeepEqual(got, want) {
		t.Errorf("LacksFields = %v, want %v", got, want)
	}
	if got := c.LacksFields([]string{"/company_name", "/address"}); got != nil {
		t.Errorf("LacksFields of present fields = %v, want none", got)
	}
}
