package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// An admin erases an ended instance from its page: a confirmation with a
// required reason, then the instances list saying what went; operators are
// not offered it, a held instance is sent back to be stopped first, and a
// second erasure is told the first one.
func TestEraseAnInstanceFromItsPage(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	inst := "/console/instances/" + f.pullHeld

	op := signedIn(t, f.env.URL, "en", f.env.Operator)
	if count(op.mustGet(inst, 200), "erase-instance") != 0 {
		t.Error("an operator is offered the erasure")
	}
	if r := op.get(inst + "/erase"); r.status != http.StatusForbidden {
		t.Errorf("an operator's erasure confirmation: %d, want 403", r.status)
	}

	fr := signedIn(t, f.env.URL, "fr", f.env.Admin)
	if count(fr.mustGet(inst, 200), "erase-instance") != 0 {
		t.Error("a held instance offers its erasure")
	}
	if r := fr.get(inst + "/erase"); r.status != http.StatusSeeOther || r.header.Get("Location") != inst {
		t.Errorf("erasing a held instance: %d to %q, want 303 to its page", r.status, r.header.Get("Location"))
	}
	if got := text(fr.mustGet(inst, 200), "flash"); got != "Cette instance est bloquée\u202f: seule une instance terminée peut être effacée. Arrêtez-la d’abord." {
		t.Errorf("erasing a held instance: flash %q", got)
	}

	f.env.Must(200, "POST", "/api/v1/instances/"+f.pullHeld+"/stop", f.env.Admin, map[string]any{"reason": "customer left"})
	en := signedIn(t, f.env.URL, "en", f.env.Admin)
	page := en.mustGet(inst, 200)
	if count(page, "erase-instance") != 1 {
		t.Fatalf("a stopped instance offers no erasure to an admin: %q", text(page, "instance-actions"))
	}
	confirm := en.mustGet(inst+"/erase", 200)
	action, form := formOf(t, confirm, "erase-form")
	if r := en.do("POST", action, form); r.status != http.StatusBadRequest || !strings.HasPrefix(text(r, "erase-error"), "Give a reason") {
		t.Errorf("erasure without a reason: %d %q", r.status, text(r, "erase-error"))
	}
	if f.status(t, f.pullHeld) != "cancelled" {
		t.Fatal("the refused erasure changed the instance")
	}
	form.Set("reason", "DSR-2291")
	r := en.do("POST", action, form)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/console/instances" {
		t.Fatalf("erasure: %d to %q, want 303 to the instances list: %.300s", r.status, r.header.Get("Location"), r.body)
	}
	list := en.mustGet("/console/instances", 200)
	if got := text(list, "flash"); !strings.HasPrefix(got, "Erased: instance "+f.pullHeld+" is deleted (occurrences: 1, attempts: 1).") {
		t.Errorf("after the erasure, flash %q", got)
	}
	if r := en.get(inst); r.status != http.StatusNotFound || !strings.HasPrefix(text(r, "error-message"), "This instance was erased by admin on ") ||
		!strings.Contains(text(r, "error-message"), "“DSR-2291”") {
		t.Errorf("the erased instance's page: %d %q, want 404 saying who erased it and why", r.status, text(r, "error-message"))
	} else if back, _ := r.doc.Find(`main a[href="/console/instances"]`).Attr("href"); back == "" {
		t.Errorf("the erased instance's page leads back to %v; want the instances (lifecycle QA: it led to external tasks)", r.doc.Find("main p a").AttrOr("href", ""))
	}
	if got := text(signedIn(t, f.env.URL, "fr", f.env.Operator).get(inst), "error-message"); !strings.HasPrefix(got, "Cette instance a été effacée par admin le ") {
		t.Errorf("the erased instance's page, in French: %q", got)
	}
	if f.auditCount(t, f.pullHeld, "erase") != 1 {
		t.Error("the erasure is not in the audit log once")
	}

	// The confirmation posted again (a second tab): told, not recorded.
	again := en.do("POST", action, form)
	if again.status != http.StatusSeeOther {
		t.Fatalf("second erasure: %d", again.status)
	}
	if got := text(en.mustGet("/console/instances", 200), "flash"); !strings.HasPrefix(got, "This instance had already been erased, by admin at ") {
		t.Errorf("second erasure: flash %q", got)
	}
	if f.auditCount(t, f.pullHeld, "erase") != 1 {
		t.Error("the second erasure was recorded")
	}
	audit := en.mustGet("/console/audit?action=erase", 200)
	if !strings.Contains(audit.body, "DSR-2291") {
		t.Error("the audit log filtered by erase does not list the erasure's reason")
	}
}
