package contracts

import (
	"slices"
	"testing"
)

func TestRaisedClassifications(t *testing.T) {
	doc := []byte(`{"name":"n","inputs":{"fields":[
	  {"name":"company","type":"object","classification":"sensitive","fields":[
	    {"name":"name","type":"text","classification":"normal"},
	    {"name":"iban","type":"text","classification":"secret"},
	    {"name":"note","type":"text"},
	    {"name":"lines","type":"list","items":{"type":"object","fields":[{"name":"sku","type":"text","classification":"normal"}]}}]},
	  {"name":"plain","type":"text","classification":"normal"}]},
	 "outputs":{"fields":[{"name":"vault","type":"object","classification":"secret","fields":[
	    {"name":"hint","type":"text","classification":"sensitive"}]}]}}`)
	want := []string{
		"/inputs/company/name: classification normal is raised to sensitive by /inputs/company, which holds it (a value is never less protected than what holds it)",
		"/inputs/company/lines/[]/sku: classification normal is raised to sensitive by /inputs/company, which holds it (a value is never less protected than what holds it)",
		"/outputs/vault/hint: classification sensitive is raised to secret by /outputs/vault, which holds it (a value is never less protected than what holds it)",
	}
	if got := RaisedClassifications(doc); !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
