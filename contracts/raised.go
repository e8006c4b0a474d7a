package contracts

import "encoding/json"

// RaisedClassifications names each field of a Working document that says
// a classification lower than the field holding it, which raises it (a
// value is never less protected than what holds it): a designer who wrote
// classification: normal under a sensitive object meant it shown, and it
// is masked (designer QA). The parsed Working keeps effective
// classifications only, hence the document. Each is a pointer as Diff
// writes them (a list's items at "/[]") with what it says and what it
// is; none for a document that does not read as a Working.
func RaisedClassifications(doc []byte) []string {
	type field struct {
		Name           string  `json:"name"`
		Classification string  `json:"classification"`
		Fields         []field `json:"fields"`
		Items          *field  `json:"items"`
	}
	var w struct {
		Inputs, Outputs struct {
			Fields []field `json:"fields"`
		}
	}
	if json.Unmarshal(doc, &w) != nil {
		return nil
	}
	var out []string
	var walk func(fs []field, path string, parent Classification, holder string)
	var one func(f field, path string, parent Classification, holder string)
	one = func(f field, path string, parent Classification, holder string) {
		said := Classification(f.Classification)
		if said != "" && !validClass(said) {
			return // refused at save, with its own message
		}
		if said != "" && said.Rank() < parent.Rank() {
			out = append(out, path+": classification "+string(said)+" is raised to "+string(parent)+
				" by "+holder+", which holds it (a value is never less protected than what holds it)")
		}
		if said != "" && said.Rank() > parent.Rank() {
			holder = path
		}
		class := MaxClass(parent, said)
		walk(f.Fields, path, class, holder)
		if f.Items != nil {
			one(*f.Items, path+"/[]", class, holder)
		}
	}
	walk = func(fs []field, path string, parent Classification, holder string) {
		for _, f := range fs {
			one(f, path+"/"+f.Name, parent, holder)
		}
	}
	walk(w.Inputs.Fields, "/inputs", ClassNormal, "")
	walk(w.Outputs.Fields, "/outputs", ClassNormal, "")
	return out
}
