package contracts

import (
	"encoding/json"
	"testing"
)

// richWorking is a realistic definition touching every type and option; it
// feeds the benchmarks, the fuzz seeds and many tests.
const richWorking = `{
  "name": "Add company to CRM",
  "description": "Creates or updates the company record",
  "inputs": {"fields": [
    {"name": "company_name", "type": "text", "required": true, "description": "Legal name", "min_length": 1, "max_length": 200},
    {"name": "website", "type": "text", "format": "uri"},
    {"name": "contact_email", "type": "text", "required": true, "format": "email", "classification": "sensitive"},
    {"name": "crm_id", "type": "text", "pattern": "^[A-Z]{3}-[0-9]{6}$"},
    {"name": "employees", "type": "integer", "minimum": 1, "maximum": 1000000},
    {"name": "annual_revenue", "type": "number", "minimum": 0, "classification": "sensitive"},
    {"name": "is_customer", "type": "boolean"},
    {"name": "founded", "type": "date"},
    {"name": "last_contact", "type": "datetime"},
    {"name": "tier", "type": "choice", "required": true, "values": ["gold", "silver", "bronze"]},
    {"name": "address", "type": "object", "fields": [
      {"name": "street", "type": "text", "required": true},
      {"name": "city", "type": "text", "required": true},
      {"name": "postcode", "type": "text", "max_length": 10},
      {"name": "country", "type": "choice", "values": ["FR", "DE", "US"]}
    ]},
    {"name": "tags", "type": "list", "max_items": 10, "items": {"type": "text", "max_length": 30}},
    {"name": "contacts", "type": "list", "items": {"type": "object", "fields": [
      {"name": "name", "type": "text", "required": true},
      {"name": "email", "type": "text", "format": "email"},
      {"name": "phone", "type": "text", "classification": "sensitive"}
    ]}},
    {"name": "card", "type": "object", "classification": "sensitive", "fields": [
      {"name": "holder", "type": "text"},
      {"name": "token", "type": "text", "classification": "secret"},
      {"name": "expiry", "type": "text", "pattern": "^[0-9]{2}/[0-9]{2}$"}
    ]},
    {"name": "api_key", "type": "text", "classification": "secret"},
    {"name": "request_id", "type": "text", "format": "uuid"},
    {"name": "notes", "type": "text", "max_length": 2000},
    {"name": "scores", "type": "list", "min_items": 0, "items": {"type": "number", "minimum": 0, "maximum": 100}},
    {"name": "priority", "type": "integer", "minimum": 1, "maximum": 5},
    {"name": "owner", "type": "object", "fields": [
      {"name": "id", "type": "integer"},
      {"name": "name", "type": "text"}
    ]}
  ]},
  "outputs": {"fields": [
    {"name": "decision", "type": "choice", "required": true, "values": ["approved", "rejected", "review"]},
    {"name": "crm_ref", "type": "text"},
    {"name": "reviewed_at", "type": "datetime"}
  ]},
  "routing_output": "decision"
}`

// richPayload is a valid value for richWorking's inputs.
const richPayload = `{
  "company_name": "Acme Industries SAS",
  "website": "https://acme.example.com/about",
  "contact_email": "jane.doe@acme.example.com",
  "crm_id": "ACM-004211",
  "employees": 420,
  "annual_revenue": 12500000.50,
  "is_customer": true,
  "founded": "1998-04-12",
  "last_contact": "2024-05-01T09:30:00Z",
  "tier": "gold",
  "address": {"street": "12 rue de la Paix", "city": "Paris", "postcode": "75002", "country": "FR"},
  "tags": ["manufacturing", "b2b", "europe"],
  "contacts": [
    {"name": "Jane Doe", "email": "jane.doe@acme.example.com", "phone": "+33 1 23 45 67 89"},
    {"name": "John Roe", "phone": "+33 6 98 76 54 32"}
  ],
  "card": {"holder": "ACME SAS", "token": "tok_9f8e7d6c5b4a", "expiry": "12/27"},
  "api_key": "sk_live_51HxQ2eZvKYlo2C",
  "request_id": "3f2b8c1e-6a4d-4e7b-9c0a-1d2e3f4a5b6c",
  "notes": "Met at the Lyon trade fair; wants a demo in June.",
  "scores": [88.5, 92, 79.25],
  "priority": 2,
  "owner": {"id": 17, "name": "Sales EMEA"}
}`

func mustParseWorking(t testing.TB, doc string) Working {
	t.Helper()
	w, vs := ParseWorking([]byte(doc))
	if vs != nil {
		t.Fatalf("ParseWorking: got violations %v, want none", vs)
	}
	return w
}

func mustParseContract(t testing.TB, doc string) Contract {
	t.Helper()
	c, vs := ParseContract([]byte(doc))
	if vs != nil {
		t.Fatalf("ParseContract(%s): got violations %v, want none", doc, vs)
	}
	return c
}

func mustCompile(t testing.TB, c Contract) *Validator {
	t.Helper()
	v, err := Compile(c)
	if err != nil {
		t.Fatalf("Compile: got error %v, want nil", err)
	}
	return v
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	va, err := decodeValue(a)
	if err != nil {
		t.Fatalf("decode %s: %v", a, err)
	}
	vb, err := decodeValue(b)
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return string(appendValue(nil, va)) == string(appendValue(nil, vb))
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
