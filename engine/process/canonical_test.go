package process

import (
	"bytes"
	"strings"
	"testing"
)

// reorderedDoc means the same as validDoc with members in another order,
// other whitespace, a literal's keys swapped and defaults written out.
const reorderedDoc = `{"nodes":{
"failed":{"status":"failed","kind":"end"},
"done":{"status":"completed","kind":"end"},
"charge":{"on_error":"failed","routes":{"declined":"failed","approved":"done"},
  "inputs":{"reference":{"from":"instance.id"},"cardholder":{"from":"input.holder"},"card_token":{"from":"input.card_token"},
            "currency":{"value":"EUR"},"amount_cents":{"from":"input.amount"}},
  "policy":{"priority":8},"destination":"payments","revision":1,"definition":"charge_card","kind":"push"},
"score":{"on_error":"failed","next":"charge","inputs":{"country":{"from":"input.company.country"},"crm_id":{"from":"nodes.crm.output.crm_id"}},
  "timeout":"PT3S","destination":"scoring-api","revision":1,"definition":"score_company","kind":"push"},
"crm":{"on_error":"failed","routes":{"existing":"done","created":"score"},
  "policy":{"priority":5,"deadline":"PT24H","retry_delay":"PT10S"},
  "inputs":{"source":{"value":"web"},"contact":{"from":"input.company.contact"},"vat_number":{"from":"input.company.vat"},
            "country":{"from":"input.company.country"},"company_name":{"from":"input.company.name"}},
  "revision":2,"definition":"add_company_to_crm","kind":"pull"}},
"start":"crm",
"inputs":{"fields":[
 {"fields":[{"required":true,"type":"text","name":"name"},{"required":true,"type":"text","name":"country"},{"type":"text","name":"vat"},
   {"fields":[{"required":true,"type":"text","name":"email"},{"type":"text","name":"phone"}],"classification":"sensitive","type":"object","name":"contact"}],
  "required":true,"type":"object","name":"company"},
 {"minimum":1,"required":true,"type":"integer","name":"amount"},
 {"classification":"secret","required":true,"type":"text","name":"card_token"},
 {"fields":[{"required":true,"type":"text","name":"name"},{"type":"text","name":"email"}],"classification":"sensitive","required":true,"type":"object","name":"holder"},
 {"items":{"type":"text"},"type":"list","name":"tags"}]},
"description":"Create the company, score it and charge the setup fee",
"name":"Onboard company"}`

func TestCanonicalRoundTrip(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{validDoc, assignDoc, reorderedDoc} {
		p := mustParse(t, []byte(doc))
		c1 := p.Canonical()
		p2 := mustParse(t, c1)
		if c2 := p2.Canonical(); !bytes.Equal(c1, c2) {
			t.Errorf("Parse(Canonical()).Canonical():\n got %s\nwant %s", c2, c1)
		}
		if got := Check(p2, resolver, testLimits); got != nil {
			t.Errorf("Check of the canonical form: got %s, want none", dump(got))
		}
	}
}

func TestCanonicalShape(t *testing.T) {
	t.Parallel()
	c := string(mustParse(t, []byte(validDoc)).Canonical())
	for _, part := range []string{
		`{"name":"Onboard company","description":`,
		`"start":"crm","nodes":{"charge":{`,
		`"policy":{"max_attempts":3,"retry_delay":"PT10S","deadline":"P1D","priority":5}`,
		`"policy":{"priority":8}`,
		`"done":{"kind":"end","status":"completed"}`,
		`"timeout":"PT3S"`,
		`"currency":{"value":"EUR"}`,
	} {
		if !strings.Contains(c, part) {
			t.Errorf("Canonical: got %s, want it to contain %s", c, part)
		}
	}
	if strings.ContainsAny(c, "\n\t") {
		t.Errorf("Canonical: got whitespace in %s", c)
	}
}

// A growing retry delay is part of the canonical form; a fixed one (the
// default factor written out) keeps the digest documents had before
// retry_backoff existed.
func TestCanonicalBackoff(t *testing.T) {
	t.Parallel()
	fixed := strings.Replace(validDoc, `"retry_delay": "PT10S"`, `"retry_delay": "PT10S", "retry_backoff": 1`, 1)
	if fixed == validDoc {
		t.Fatal("validDoc has no retry_delay to add retry_backoff to")
	}
	if a, b := mustParse(t, []byte(validDoc)).Digest(), mustParse(t, []byte(fixed)).Digest(); a != b {
		t.Errorf("retry_backoff 1 written out: digest %s, want %s", b, a)
	}
	grows := strings.Replace(validDoc, `"retry_delay": "PT10S"`, `"retry_delay": "PT10S", "max_retry_delay": "PT5M", "retry_backoff": 1.5`, 1)
	p := mustParse(t, []byte(grows))
	c := string(p.Canonical())
	if want := `"policy":{"max_attempts":3,"retry_delay":"PT10S","retry_backoff":1.5,"max_retry_delay":"PT5M","deadline":"P1D","priority":5}`; !strings.Contains(c, want) {
		t.Errorf("Canonical: got %s, want it to contain %s", c, want)
	}
	if again := mustParse(t, []byte(c)).Canonical(); string(again) != c {
		t.Errorf("Parse(Canonical()).Canonical():\n got %s\nwant %s", again, c)
	}
	if p.Digest() == mustParse(t, []byte(validDoc)).Digest() {
		t.Error("a growing retry delay left the digest unchanged")
	}
}

func TestDigestStable(t *testing.T) {
	t.Parallel()
	a := mustParse(t, []byte(validDoc)).Digest()
	b := mustParse(t, []byte(reorderedDoc)).Digest()
	if a != b {
		t.Errorf("Digest: got %s for the reordered document, want %s", b, a)
	}
	if !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Errorf("Digest: got %q, want sha256: and 64 hex digits", a)
	}
	changed := mustParse(t, edit(t, validDoc, func(m map[string]any) { sub(node(m, "crm"), "policy")["priority"] = 6 })).Digest()
	if changed == a {
		t.Errorf("Digest: got the same digest %s after changing a priority, want another", a)
	}
}
