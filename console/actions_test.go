package console_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/go-chi/chi/v5"

	"github.com/relais/relais/console"
	"github.com/relais/relais/internal/relaistest"
)

// formOf returns the action and the hidden fields of the form a testid
// selects: what a browser would send with it.
func formOf(t *testing.T, r response, testid string) (string, url.Values) {
	t.Helper()
	form := r.doc.Find(`form[data-testid="` + testid + `"]`)
	if form.Length() != 1 {
		t.Fatalf("%d forms %s on the page; body %.400s", form.Length(), testid, r.body)
	}
	action, _ := form.Attr("action")
	vals := url.Values{}
	form.Find(`input[type=hidden]`).Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		v, _ := s.Attr("value")
		vals.Add(name, v)
	})
	return action, vals
}

// auditCount is how many audit records of action the instance has.
func (f *fixture) auditCount(t *testing.T, instance, action string) int {
	t.Helper()
	path := "/api/v1/audit/actions?instance=" + instance
	if action != "" {
		// An empty filter is refused: "" means every action.
		path += "&action=" + action
	}
	items := f.env.Must(200, "GET", path, f.env.Operator, nil).JSON(t)["items"].([]any)
	return len(items)
}

func (f *fixture) status(t *testing.T, instance string) string {
	t.Helper()
	return f.env.Must(200, "GET", "/api/v1/instances/"+instance, f.env.Operator, nil).JSON(t)["status"].(string)
}

func (f *fixture) occurrence(t *testing.T, id string) map[string]any {
	t.Helper()
	return f.env.Must(200, "GET", "/api/v1/occurrences/"+id, f.env.Operator, nil).JSON(t)
}

// holdScoring starts a scoring instance with businessKey and holds it
// (its worker fails it with SCORER_DOWN); it returns the instance and its
// occurrence.
func (f *fixture) holdScoring(t *testing.T, businessKey string) (string, string) {
	t.Helper()
	env := f.env
	id := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{
		"business_key": businessKey, "inputs": map[string]any{"crm_id": "CRM-" + businessKey}}).JSON(t)["id"].(string)
	occs := env.Must(200, "GET", "/api/v1/occurrences?instance="+id, env.Operator, nil).JSON(t)["items"].([]any)
	occ := occs[0].(map[string]any)["id"].(string)
	f.failScoring(t, occ)
	if s := f.status(t, id); s != "held" {
		t.Fatalf("scoring %s is %s, want held", businessKey, s)
	}
	return id, occ
}

// failScoring has the scorer fetch every available scoring occurrence and
// fail occ with SCORER_DOWN, handing the others back.
func (f *fixture) failScoring(t *testing.T, occ string) {
	t.Helper()
	f.failScoringWith(t, occ, "SCORER_DOWN", "down")
}

// failScoringWith is failScoring with the worker's code and message.
func (f *fixture) failScoringWith(t *testing.T, occ, code, message string) {
	t.Helper()
	env := f.env
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.scorer, map[string]any{"worker_id": "scorer-2", "max_tasks": 100,
		"subscriptions": []any{map[string]any{"definition": "score_company"}}}).JSON(t)["occurrences"].([]any)
	found := false
	for _, o := range got {
		id := o.(map[string]any)["id"].(string)
		if id == occ {
			found = true
			continue
		}
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+id+"/release", f.scorer, map[string]any{"worker_id": "scorer-2"})
	}
	if !found {
		t.Fatalf("occurrence %s was not offered to the scorer (%d fetched)", occ, len(got))
	}
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", f.scorer, map[string]any{"worker_id": "scorer-2",
		"error_code": code, "message": message, "retryable": false})
}

// A worker may report a code Relais makes too (invalid_outputs): its
// message is said as the worker's, not as Relais's English, and Relais's
// meaning of the code is not put in its mouth (designer QA: "Message from
// Relais" over a worker's French).
func TestAWorkersOwnCodeIsSaidAsItsOwn(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	env := f.env
	id := env.Must(201, "POST", "/api/v1/processes/scoring/instances", env.Operator, map[string]any{
		"business_key": "own-code", "inputs": map[string]any{"crm_id": "CRM-own"}}).JSON(t)["id"].(string)
	occ := env.Must(200, "GET", "/api/v1/occurrences?instance="+id, env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	f.failScoringWith(t, occ, "invalid_outputs", "j’ai cassé mon worker")
	for _, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		for _, page := range []string{"/console/occurrences/" + occ, "/console/instances/" + id} {
			r := b.mustGet(page, 200)
			for _, relais := range []string{"Message from Relais", "Message de Relais", "outputs contract", "contrat de sorties"} {
				if strings.Contains(r.body, relais) {
					t.Errorf("%s (%s) says %q of the worker's invalid_outputs", page, lang, relais)
				}
			}
			if !strings.Contains(r.body, map[string]string{"en": "Message from the worker", "fr": "Message de l’exécutant"}[lang]) {
				t.Errorf("%s (%s) does not say the message is the worker's", page, lang)
			}
			if r.doc.Find(`body [lang="en"]`).FilterFunction(func(_ int, s *goquery.Selection) bool { return strings.Contains(s.Text(), "cassé") }).Length() > 0 {
				t.Errorf("%s (%s) marks the worker's French as English", page, lang)
			}
		}
	}
}

// TestRetryThenAbandonAHeldInstance walks an incident through the console:
// a retry needs a reason, is confirmed, redirects, offers the occurrence
// again with a fresh budget (completing nothing), is attributed and
// audited; abandoning a running instance is refused; once held again it
// can be abandoned.
func TestRetryThenAbandonAHeldInstance(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)
	inst := "/console/instances/" + f.pullHeld

	page := b.mustGet(inst, 200)
	href, _ := page.doc.Find(`[data-testid=retry-instance]`).Attr("href")
	confirm := b.mustGet(href, 200)
	action, form := formOf(t, confirm, "retry-form")
	if method, _ := confirm.doc.Find(`[data-testid=retry-form]`).Attr("method"); method != "post" || action != inst+"/retry" {
		t.Fatalf("retry form: %s %s", method, action)
	}
	if f.status(t, f.pullHeld) != "held" {
		t.Fatal("showing the confirmation acted")
	}
	// The page is there to take a reason: its field has the focus (a
	// keyboard user tabbed through the whole navigation to reach it), and
	// a screen reader landing there reads the question and its consequence.
	asked := confirm.doc.Find(`#action-reason`)
	if _, focused := asked.Attr("autofocus"); !focused || confirm.doc.Find("[autofocus]").Length() != 1 {
		t.Errorf("the confirmation's reason has autofocus %t (%d on the page), want the page's one", focused, confirm.doc.Find("[autofocus]").Length())
	}
	for _, id := range strings.Fields(asked.AttrOr("aria-describedby", "")) {
		if confirm.doc.Find("#"+id).Length() != 1 || strings.TrimSpace(confirm.doc.Find("#"+id).Text()) == "" {
			t.Errorf("the reason is described by #%s, which the page lacks or leaves empty", id)
		}
	}
	if by := asked.AttrOr("aria-describedby", ""); by != "action-question action-consequence action-reason-hint" {
		t.Errorf("the confirmation's reason is described by %q, want the question, its consequence and the hint", by)
	}

	// No reason: refused, explained, nothing done.
	form.Set("reason", "   ")
	r := b.do("POST", action, form)
	if r.status != http.StatusBadRequest || !strings.HasPrefix(text(r, "retry-error"), "Indiquez un motif\u202f:") {
		t.Errorf("retry without a reason: %d %q", r.status, text(r, "retry-error"))
	}
	// The field says it is what is wrong, where a screen reader is.
	field := r.doc.Find(`#action-reason`)
	if inv, _ := field.Attr("aria-invalid"); inv != "true" {
		t.Errorf("the refused reason's aria-invalid = %q, want true", inv)
	}
	if by, _ := field.Attr("aria-describedby"); by != "action-question action-consequence action-reason-hint action-error" || r.doc.Find(`#action-error`).Length() != 1 {
		t.Errorf("the refused reason is described by %q, want its hint and the error", by)
	}
	if _, focused := field.Attr("autofocus"); !focused {
		t.Error("the refused reason does not take the focus")
	}
	if f.status(t, f.pullHeld) != "held" || f.auditCount(t, f.pullHeld, "retry") != 0 {
		t.Fatal("a retry without a reason changed something")
	}

	form.Set("reason", "scoring model redeployed")
	r = b.do("POST", action, form)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != inst {
		t.Fatalf("retry: %d %q %.300s", r.status, r.header.Get("Location"), r.body)
	}
	after := b.mustGet(inst, 200)
	if got := text(after, "flash"); got != "Reprise\u202f: l’occurrence du nœud score est proposée de nouveau. Consigné dans le journal d’audit." {
		t.Errorf("flash after retry = %q", got)
	}
	if got := text(after, "instance-status"); got != "en cours" {
		t.Errorf("status after retry = %q, want en cours", got)
	}
	if got := text(after, "attribution"); !strings.HasPrefix(got, "Reprise par operator le ") || !strings.Contains(got, "«\u202fscoring model redeployed\u202f»") {
		t.Errorf("attribution = %q", got)
	}
	occ := f.occurrence(t, f.pullHeldOcc)
	if occ["status"] != "available" || occ["attempts_left"].(float64) != 2 || occ["outputs"] != nil {
		t.Errorf("occurrence after retry: status %v, attempts_left %v, outputs %v; want available, 2 (a fresh budget), none",
			occ["status"], occ["attempts_left"], occ["outputs"])
	}
	if n := f.auditCount(t, f.pullHeld, "retry"); n != 1 {
		t.Errorf("%d retry records, want 1", n)
	}

	// Abandon no longer applies: the link is gone, the page redirects and
	// a late form is refused with what happened.
	if count(after, "abandon-instance") != 0 || count(after, "retry-instance") != 0 || count(after, "stop-instance") != 1 {
		t.Errorf("a running instance offers retry %d, abandon %d, stop %d", count(after, "retry-instance"), count(after, "abandon-instance"), count(after, "stop-instance"))
	}
	if r := b.get(inst + "/abandon"); r.status != http.StatusSeeOther {
		t.Errorf("abandon confirmation of a running instance: %d, want a redirect", r.status)
	}
	// The notice is for that instance's page: another page opened before
	// the redirect is followed (another tab) does not show it.
	if got := text(b.mustGet("/console/instances", 200), "flash"); got != "" {
		t.Errorf("the instance list shows the notice meant for an instance: %q", got)
	}
	if got := text(b.mustGet(inst, 200), "flash"); got != "Cette instance est en cours, pas bloquée\u202f: il n’y a rien à abandonner." {
		t.Errorf("flash = %q", got)
	}
	late := b.do("POST", inst+"/abandon", url.Values{"csrf": {csrfOf(t, after)}, "reason": {"late"}})
	if late.status != http.StatusConflict || !strings.HasPrefix(text(late, "abandon-error"), "Cette instance n’est plus bloquée (elle est en cours désormais)") {
		t.Errorf("abandoning a running instance: %d %q", late.status, text(late, "abandon-error"))
	}
	if text(late, "abandon-reason") != "late" {
		t.Errorf("the refused form lost the reason: %q", text(late, "abandon-reason"))
	}

	// Held again, then abandoned, in English.
	f.failScoring(t, f.pullHeldOcc)
	en := signedIn(t, f.env.URL, "en", f.env.Admin)
	confirm = en.mustGet(inst+"/abandon", 200)
	action, form = formOf(t, confirm, "abandon-form")
	form.Set("reason", "lead withdrawn")
	if r := en.do("POST", action, form); r.status != http.StatusSeeOther {
		t.Fatalf("abandon: %d %.300s", r.status, r.body)
	}
	page = en.mustGet(inst, 200)
	if text(page, "instance-status") != "failed" || !strings.HasPrefix(text(page, "instance-error-code"), "abandoned") ||
		!strings.HasPrefix(text(page, "attribution"), "Abandoned by admin at ") {
		t.Errorf("after abandon: %q %q %q", text(page, "instance-status"), text(page, "instance-error-code"), text(page, "attribution"))
	}
	// Why it was held stays on the page: "abandoned" is only the decision.
	if !strings.HasPrefix(text(page, "held-for-code"), "SCORER_DOWN") || !strings.Contains(text(page, "held-for-message"), "down") {
		t.Errorf("after abandon, held for %q %q; want SCORER_DOWN and its message", text(page, "held-for-code"), text(page, "held-for-message"))
	}
	// An ended instance offers an admin its erasure, nothing else.
	if count(page, "instance-actions") != 1 || count(page, "erase-instance") != 1 || count(page, "retry-instance")+count(page, "abandon-instance")+count(page, "stop-instance") != 0 {
		t.Error("an ended instance offers an admin other actions than its erasure, or not that one")
	}
	// A retry of a failed instance (a bookmarked link) is told what would
	// have held its failure.
	if r := en.get(inst + "/retry"); r.status != http.StatusSeeOther {
		t.Errorf("retry confirmation of a failed instance: %d, want a redirect", r.status)
	}
	if got := text(en.mustGet(inst, 200), "flash"); !strings.HasPrefix(got, "This instance is failed, not held: there is nothing to retry.") ||
		!strings.Contains(got, "on_error leads to hold") {
		t.Errorf("flash = %q, want it to say what holds a failure", got)
	}
}

// TestConcurrentActionsOnOneInstanceApplyOnce: operators racing to retry
// and abandon one held instance, then to stop it, each get a defined
// answer (one applies, the others are told someone acted first), and the
// audit log records each change once.
func TestConcurrentActionsOnOneInstanceApplyOnce(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	inst := "/console/instances/" + f.pullHeld
	const racers = 8
	browsers := make([]*browser, racers)
	forms := make([]url.Values, racers)
	for i := range browsers {
		browsers[i] = signedIn(t, f.env.URL, "en", f.env.Operator)
		forms[i] = url.Values{"csrf": {csrfOf(t, browsers[i].mustGet(inst, 200))}, "reason": {"race"}}
	}
	race := func(actions func(i int) string) []response {
		out := make([]response, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() { out[i] = browsers[i].do("POST", inst+"/"+actions(i), forms[i]) })
		}
		wg.Wait()
		return out
	}
	res := race(func(i int) string { return []string{"retry", "abandon"}[i%2] })
	applied := 0
	for i, r := range res {
		switch r.status {
		case http.StatusSeeOther:
			applied++
		case http.StatusConflict:
			a := []string{"retry", "abandon"}[i%2]
			if !strings.HasPrefix(text(r, a+"-error"), "This instance is no longer held") {
				t.Errorf("racer %d (%s): 409 saying %q", i, a, text(r, a+"-error"))
			}
		default:
			t.Errorf("racer %d: %d %.200s", i, r.status, r.body)
		}
	}
	records := f.auditCount(t, f.pullHeld, "retry") + f.auditCount(t, f.pullHeld, "abandon")
	if applied != 1 || records != 1 {
		t.Fatalf("%d racers applied, %d records; want exactly one of each", applied, records)
	}

	status := f.status(t, f.pullHeld)
	res = race(func(int) string { return "stop" })
	stops := f.auditCount(t, f.pullHeld, "stop")
	switch status {
	case "running":
		if stops != 1 || f.status(t, f.pullHeld) != "cancelled" {
			t.Errorf("stopping a running instance concurrently: %d records, status %s", stops, f.status(t, f.pullHeld))
		}
		for i, r := range res {
			if r.status != http.StatusSeeOther {
				t.Errorf("stop racer %d: %d", i, r.status)
			}
		}
	case "failed": // abandoned first: nothing to stop
		if stops != 0 {
			t.Errorf("%d stop records on an abandoned instance", stops)
		}
		for i, r := range res {
			if r.status != http.StatusConflict {
				t.Errorf("stop racer %d on an ended instance: %d, want 409", i, r.status)
			}
		}
	default:
		t.Fatalf("status %s after the race", status)
	}
	// Every racer's next page says what happened to it; the losers of the
	// stop race learn that it was already stopped.
	already := 0
	for _, b := range browsers {
		if strings.HasPrefix(text(b.mustGet(inst, 200), "flash"), "This instance was already stopped") {
			already++
		}
	}
	if status == "running" && already != racers-1 {
		t.Errorf("%d stop racers were told it was already stopped, want %d", already, racers-1)
	}
}

// TestRetryAfterStopIsRefused: an operator who confirmed a retry while
// another stopped the instance gets a 409 saying so; the occurrence is not
// offered again.
func TestRetryAfterStopIsRefused(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	inst := "/console/instances/" + f.pushHeld[0]
	action, form := formOf(t, b.mustGet(inst+"/retry", 200), "retry-form")
	f.env.Must(200, "POST", "/api/v1/instances/"+f.pushHeld[0]+"/stop", f.env.Admin, map[string]any{"reason": "customer left"})
	form.Set("reason", "try again")
	r := b.do("POST", action, form)
	if r.status != http.StatusConflict || !strings.HasPrefix(text(r, "retry-error"), "This instance is no longer held (it is cancelled now)") {
		t.Errorf("retry of a stopped instance: %d %q", r.status, text(r, "retry-error"))
	}
	if occ := f.occurrence(t, f.pushHeldOcc); occ["status"] != "failed" {
		t.Errorf("the stopped instance's occurrence is %v, want still failed", occ["status"])
	}
	if n := f.auditCount(t, f.pushHeld[0], "retry"); n != 0 {
		t.Errorf("%d retry records", n)
	}
	if got := text(b.mustGet("/console/occurrences/"+f.pushHeldOcc, 200), "state-text"); !strings.HasPrefix(got, "Failed") {
		t.Errorf("occurrence state %q", got)
	}
}

// TestActionRefusedWhenSomeoneActedMeanwhile: the operator decides on the
// instance's page; a colleague's retry since, held again by the same error
// (so the instance looks unchanged), sends them back to look again, from
// the confirmation page as from its form, and nothing is done; from the
// page as it is now, the action applies.
func TestActionRefusedWhenSomeoneActedMeanwhile(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	id, occ := f.holdScoring(t, "lead-7")
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)
	retryByColleague := func() {
		t.Helper()
		f.env.Must(200, "POST", "/api/v1/instances/"+id+"/retry", f.env.Admin, map[string]any{"reason": "scorer back?"})
		f.failScoring(t, occ)
		if s := f.status(t, id); s != "held" {
			t.Fatalf("instance %s after the colleague's retry failed again, want held", s)
		}
	}
	abandonHref := func() string {
		t.Helper()
		href, _ := b.mustGet("/console/instances/"+id, 200).doc.Find(`[data-testid=abandon-instance]`).Attr("href")
		if !strings.Contains(href, "seen=") {
			t.Fatalf("the abandon link %q does not say what the page showed", href)
		}
		return href
	}
	want := "Quelqu’un a agi sur cette instance après l’ouverture de cette page (reprise par "

	// Seen on the instance page, acted on by a colleague before the
	// confirmation opens: back to the instance, with why.
	href := abandonHref()
	retryByColleague()
	back := b.get(href)
	if back.status != http.StatusSeeOther || back.header.Get("Location") != "/console/instances/"+id {
		t.Fatalf("the confirmation after a colleague's retry: %d to %q, want 303 back to the instance", back.status, back.header.Get("Location"))
	}
	if got := text(b.mustGet("/console/instances/"+id, 200), "flash"); !strings.HasPrefix(got, want) {
		t.Errorf("the instance page says %q, want %q…", got, want)
	}

	// Acted on by a colleague while the confirmation is open: refused,
	// no form offered, the reason shown as not recorded.
	action, form := formOf(t, b.mustGet(abandonHref(), 200), "abandon-form")
	retryByColleague()
	form.Set("reason", "on abandonne")
	stale := b.do("POST", action, form)
	if stale.status != http.StatusConflict || !strings.HasPrefix(text(stale, "abandon-error"), want) || count(stale, "abandon-form") != 0 {
		t.Fatalf("abandon after a colleague's retry: %d %q (%d forms), want 409 %q… and no form", stale.status, text(stale, "abandon-error"), count(stale, "abandon-form"), want)
	}
	// With no form left to focus, the refusal takes the focus, and the
	// title says it, so that a screen reader reads it (a11y QA).
	if _, ok := stale.doc.Find(`[data-testid=abandon-error]`).Attr("autofocus"); !ok {
		t.Error("the refusal of a closed confirmation does not take the focus")
	}
	if title := stale.doc.Find("title").Text(); !strings.HasPrefix(title, "Erreur\u202f: ") {
		t.Errorf("title of the refusal = %q, want it to start with the error", title)
	}
	if s := f.status(t, id); s != "held" || f.auditCount(t, id, "abandon") != 0 {
		t.Fatalf("a refused abandon left the instance %s with %d abandon records, want held with none", s, f.auditCount(t, id, "abandon"))
	}

	// From the page as it is now: applied.
	action, form = formOf(t, b.mustGet(abandonHref(), 200), "abandon-form")
	form.Set("reason", "on abandonne")
	if done := b.do("POST", action, form); done.status != http.StatusSeeOther {
		t.Fatalf("abandon from the page as it is now: %d %q", done.status, text(done, "abandon-error"))
	}
	if s := f.status(t, id); s != "failed" {
		t.Errorf("instance %s after the abandon, want failed", s)
	}
}

// TestBulkRefusalLeadsBackToTheList: a bulk action the console cannot
// take (an unknown action, a status it does not apply to) says why and
// leads back to the instances list it came from, in the reader's language.
func TestBulkRefusalLeadsBackToTheList(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		for _, path := range []string{"/console/instances/bulk?action=bogus", "/console/instances/bulk?action=abandon&status=running", "/console/instances/bulk?action=abandon&retrying_at=score_company"} {
			r := b.mustGet(path, http.StatusBadRequest)
			back := r.doc.Find(`main a[href="/console/instances"]`)
			if want := []string{"Back to the list", "Revenir à la liste"}[i]; back.Length() == 0 || !strings.Contains(back.Text(), want) {
				t.Errorf("%s %s: no link %q back to the instances list", lang, path, want)
			}
		}
	}
}

// TestHeldInstanceShowsItsError: a held instance's page shows what the
// service said when it failed, beside its error code, not one page away.
func TestHeldInstanceShowsItsError(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	id, _ := f.holdScoring(t, "lead-6")
	for _, lang := range []string{"en", "fr"} {
		page := signedIn(t, f.env.URL, lang, f.env.Operator).mustGet("/console/instances/"+id, 200)
		if got := text(page, "instance-error-message"); got != "down" {
			t.Errorf("%s: the held instance's error message reads %q, want the service's \"down\"", lang, got)
		}
	}
}

// TestBulkRetryConfirmsTheCount: the count shown is the count confirmed; a
// count that changed meanwhile is shown again to confirm and nothing is
// applied; applied, the result says how many; repeating the form applies
// nothing twice.
func TestBulkRetryConfirmsTheCount(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	a, _ := f.holdScoring(t, "lead-8")
	c, _ := f.holdScoring(t, "lead-9")
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)

	list := b.mustGet("/console/instances?process=scoring&status=held", 200)
	if got := count(list, "instance-row"); got != 3 {
		t.Fatalf("%d held scoring instances listed, want 3", got)
	}
	href, _ := list.doc.Find(`[data-testid=bulk-retry]`).Attr("href")
	// Running when the count is read, held after it.
	heldLater := f.env.Must(201, "POST", "/api/v1/processes/scoring/instances", f.env.Operator, map[string]any{
		"business_key": "lead-11", "inputs": map[string]any{"crm_id": "CRM-lead-11"}}).JSON(t)["id"].(string)
	heldLaterOcc := f.env.Must(200, "GET", "/api/v1/occurrences?instance="+heldLater, f.env.Operator, nil).JSON(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	confirm := b.mustGet(href, 200)
	if got, _ := confirm.doc.Find(`[data-testid=bulk-count]`).Attr("data-count"); got != "3" {
		t.Fatalf("bulk count %q, want 3 (%s)", got, text(confirm, "bulk-count"))
	}
	if n := count(confirm, "bulk-unfiltered"); n != 0 {
		t.Errorf("a filter by process warns that it is unfiltered")
	}
	action, form := formOf(t, confirm, "bulk-form")
	if form.Get("process") != "scoring" || form.Get("status") != "held" || form.Get("confirm_count") != "3" || form.Get("counted_at") == "" {
		t.Fatalf("the bulk form carries %v", form)
	}
	// Instances that come to match after the count (an incident under
	// way: a new one held, a running one held) change nothing: the action
	// is on those that matched when the count was read. They are left for
	// the next action.
	late, _ := f.holdScoring(t, "lead-10")
	f.failScoring(t, heldLaterOcc)

	// Someone stops one meanwhile: the confirmed 3 no longer holds.
	f.env.Must(200, "POST", "/api/v1/instances/"+c+"/stop", f.env.Admin, map[string]any{"reason": "duplicate"})
	form.Set("reason", "scorer is back")
	stale := b.do("POST", action, form)
	if stale.status != http.StatusConflict || !strings.HasPrefix(text(stale, "bulk-changed"), "Le nombre a changé depuis le décompte (il était de 3)") {
		t.Fatalf("stale count: %d %q", stale.status, text(stale, "bulk-changed"))
	}
	if n := f.auditCount(t, a, "retry"); n != 0 || f.status(t, a) != "held" {
		t.Fatal("a stale count applied something")
	}
	// Switching language from the refused form keeps its action and filter.
	switchHref, _ := stale.doc.Find(`[data-testid=lang-en]`).Attr("href")
	next, err := url.Parse(switchHref)
	if err != nil {
		t.Fatal(err)
	}
	if r := b.get(next.Query().Get("next")); r.status != 200 || count(r, "bulk-form") != 1 {
		t.Errorf("the language switch after a refused bulk form leads to %s: %d", next.Query().Get("next"), r.status)
	}
	action, form = formOf(t, stale, "bulk-form")
	if form.Get("confirm_count") != "2" || text(stale, "bulk-reason") != "scorer is back" {
		t.Fatalf("re-confirmation carries %v and reason %q", form, text(stale, "bulk-reason"))
	}
	form.Set("reason", text(stale, "bulk-reason"))
	done := b.do("POST", action, form)
	if done.status != http.StatusSeeOther || !strings.HasPrefix(done.header.Get("Location"), "/console/audit?bulk=") {
		t.Fatalf("bulk retry: %d %q %.300s", done.status, done.header.Get("Location"), done.body)
	}
	// Another bulk action's audit page, opened instead of following the
	// redirect, does not show this one's notice (on-call QA).
	if got := text(b.mustGet("/console/audit?action=retry", 200), "flash"); got != "" {
		t.Errorf("the audit log filtered otherwise shows %q", got)
	}
	result := b.mustGet(done.header.Get("Location"), 200)
	if got := text(result, "flash"); got != "Action groupée (reprise) appliquée à 2 instances." {
		t.Errorf("result notice %q", got)
	}
	if got := count(result, "audit-row"); got != 2 {
		t.Errorf("%d audit rows for the bulk action, want 2", got)
	}
	for _, id := range []string{a, f.pullHeld} {
		if f.status(t, id) != "running" || f.auditCount(t, id, "retry") != 1 {
			t.Errorf("instance %s: %s with %d retries, want running with 1", id, f.status(t, id), f.auditCount(t, id, "retry"))
		}
	}
	for _, id := range []string{late, heldLater} {
		if f.status(t, id) != "held" || f.auditCount(t, id, "retry") != 0 {
			t.Errorf("instance %s, held after the count: %s with %d retries, want held and untouched", id, f.status(t, id), f.auditCount(t, id, "retry"))
		}
	}

	// The same form again (a double click, a reload): the count no longer
	// holds, nothing is applied twice.
	again := b.do("POST", action, form)
	if again.status != http.StatusConflict || count(again, "bulk-nothing") != 1 || count(again, "bulk-form") != 0 {
		t.Errorf("repeated bulk form: %d, nothing %d, form %d", again.status, count(again, "bulk-nothing"), count(again, "bulk-form"))
	}
	// It says the action ran, not that something else changed the count.
	if got := text(again, "bulk-changed"); !strings.HasPrefix(got, "Cette action groupée a déjà été appliquée") {
		t.Errorf("repeated bulk form says %q, want that it was already applied", got)
	}
	// With no form left to focus, the message takes the focus (a11y).
	if _, ok := again.doc.Find(`[data-testid=bulk-changed]`).Attr("autofocus"); !ok {
		t.Error("the repeated bulk form's message does not take the focus")
	}
	if f.auditCount(t, a, "retry") != 1 {
		t.Error("a repeated bulk form retried again")
	}

	// A filter the action cannot apply to is refused before counting.
	if r := b.get("/console/instances/bulk?action=retry&status=completed"); r.status != http.StatusBadRequest {
		t.Errorf("bulk retry of completed instances: %d, want 400", r.status)
	}
	// A status that does not exist is said to be unknown, once, in a
	// sentence of its own.
	r := b.get("/console/instances/bulk?action=stop&status=bogus&revision=x")
	if got := text(r, "error-message"); r.status != http.StatusBadRequest || strings.Contains(got, "ones") || strings.Contains(got, ".;") || !strings.Contains(got, "bogus") {
		t.Errorf("bulk stop of an unknown status: %d %q", r.status, got)
	}
}

// TestActionFormsNeedCSRFAndAnOperator: every form that changes something
// refuses a missing, wrong or foreign CSRF token (403) and a designer (403),
// and changes nothing; an administrator may act like an operator.
func TestActionFormsNeedCSRFAndAnOperator(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	inst := "/console/instances/" + f.pullHeld
	posts := map[string]url.Values{
		inst + "/retry":               {"reason": {"x"}},
		inst + "/abandon":             {"reason": {"x"}},
		inst + "/stop":                {"reason": {"x"}},
		"/console/instances/bulk":     {"action": {"stop"}, "confirm_count": {"9"}, "reason": {"x"}},
		"/console/preferences":        {"tz": {"+02:00"}},
		"/console/preferences/reload": {"pause": {"1"}, "next": {"/console/health"}},
	}
	op := signedIn(t, f.env.URL, "en", f.env.Operator)
	other := signedIn(t, f.env.URL, "en", f.env.Admin)
	foreign := csrfOf(t, other.mustGet(inst, 200))
	for path, form := range posts {
		for name, csrf := range map[string][]string{"missing": nil, "wrong": {"forged"}, "foreign": {foreign}} {
			vals := url.Values{}
			for k, v := range form {
				vals[k] = v
			}
			if csrf != nil {
				vals["csrf"] = csrf
			}
			if r := op.do("POST", path, vals); r.status != http.StatusForbidden || text(r, "page-title") != "Form refused" {
				t.Errorf("POST %s with a %s token: %d %q, want 403", path, name, r.status, text(r, "page-title"))
			}
		}
	}
	// The refusal keeps the session's chrome (it looked signed out) and
	// leads back to the form's page, which the Referer names.
	op.referer = inst + "/stop"
	r := op.do("POST", inst+"/stop", url.Values{"reason": {"x"}, "csrf": {"forged"}})
	if back, _ := r.doc.Find(`main a[href="` + inst + `/stop"]`).Attr("href"); back == "" || count(r, "nav-instances") != 1 {
		t.Errorf("the refused form's page: a link back %q, navigation %d; want both", back, count(r, "nav-instances"))
	}
	op.referer = ""
	designer := newBrowser(t, f.env.URL, "en")
	designer.signIn(f.env.Designer)
	csrf := csrfOf(t, designer.mustGet("/console/definitions", 200))
	for path, form := range posts {
		if strings.HasPrefix(path, "/console/preferences") {
			continue // a display preference: every role has one
		}
		vals := url.Values{"csrf": {csrf}}
		for k, v := range form {
			vals[k] = v
		}
		if r := designer.do("POST", path, vals); r.status != http.StatusForbidden {
			t.Errorf("designer POST %s: %d, want 403", path, r.status)
		}
	}
	for _, p := range f.incidentPages() {
		if p.name == "preferences" || strings.HasPrefix(p.path, "/console/processes") {
			continue // every role's, and designers read processes
		}
		if r := designer.get(p.path); r.status != http.StatusForbidden {
			t.Errorf("designer GET %s: %d, want 403", p.path, r.status)
		}
	}
	if f.status(t, f.pullHeld) != "held" || f.auditCount(t, f.pullHeld, "") != 0 {
		t.Fatal("a refused form changed the instance")
	}
	// An administrator may act.
	action, form := formOf(t, other.mustGet(inst+"/stop", 200), "stop-form")
	form.Set("reason", "admin closes the incident")
	if r := other.do("POST", action, form); r.status != http.StatusSeeOther || f.status(t, f.pullHeld) != "cancelled" {
		t.Errorf("admin stop: %d, status %s", r.status, f.status(t, f.pullHeld))
	}
}

// TestSearchBox: an id goes to its page, a business key to the instances
// it names, anything else says it found nothing.
func TestSearchBox(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)
	for q, want := range map[string]string{
		f.pullHeld:             "/console/instances/" + f.pullHeld,
		f.pullHeldOcc:          "/console/occurrences/" + f.pullHeldOcc,
		" " + f.pullHeld + " ": "/console/instances/" + f.pullHeld,
		"order-1001":           "/console/instances?business_key=order-1001",
	} {
		r := b.get("/console/search?q=" + url.QueryEscape(q))
		if r.status != http.StatusSeeOther || r.header.Get("Location") != want {
			t.Errorf("search %q: %d to %q, want %q", q, r.status, r.header.Get("Location"), want)
		}
	}
	list := b.mustGet("/console/instances?business_key=order-1001", 200)
	if ids := count(list, "instance-row"); ids != 1 {
		t.Errorf("business key order-1001 lists %d instances", ids)
	}
	none := b.get("/console/search?q=" + url.QueryEscape("00000000-0000-7000-8000-00000000beef"))
	// A whole id once shown may have been deleted by retention: said.
	if none.status != http.StatusNotFound || !strings.HasPrefix(text(none, "search-message"), "Aucune instance ni occurrence n’a l’identifiant") ||
		!strings.Contains(text(none, "search-message"), "RELAIS_RETENTION") {
		t.Errorf("unknown id: %d %q", none.status, text(none, "search-message"))
	}
	if v, _ := none.doc.Find(`#search-q`).Attr("value"); v != "00000000-0000-7000-8000-00000000beef" {
		t.Errorf("the search box lost what was typed: %q", v)
	}
	if r := b.get("/console/search?q="); r.status != 200 || text(r, "search-message") == "" {
		t.Errorf("empty search: %d %q", r.status, text(r, "search-message"))
	}
	// An overlong search is not written back into the page's links and
	// search box (security QA: 100 KB came back four times over).
	if r := b.get("/console/search?q=" + strings.Repeat("x", 100_000)); r.status != http.StatusBadRequest || len(r.body) > 40_000 {
		t.Errorf("a 100 KB search: %d, a page of %d bytes; want 400 without it echoed", r.status, len(r.body))
	}
	// The end of an id, as the lists show it: the answer says to open the
	// row for the whole id.
	for _, q := range []string{"7d08993c", "…7d08993c", "8f12-7d08993c"} {
		r := b.get("/console/search?q=" + url.QueryEscape(q))
		if r.status != http.StatusNotFound || !strings.Contains(text(r, "search-message"), "pas un identifiant entier") {
			t.Errorf("a piece of an id %q: %d %q", q, r.status, text(r, "search-message"))
		}
	}
}

// A NUL character, or bytes that are not UTF-8, in a filter or a form
// field is a 400 naming the field, as the API answers: PostgreSQL refuses
// such text, and each of these pages failed with a 500 before.
func TestUnstorableFieldsAreRefused(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	for path, field := range map[string]string{
		"/console/instances?process=%00":                  "process",
		"/console/instances?business_key=a%FFb":           "business_key",
		"/console/occurrences?definition=%00":             "definition",
		"/console/instances/bulk?action=stop&process=%FF": "process",
		"/console/search?q=%00":                           "q",
	} {
		r := b.get(path)
		want := "The field “" + field + "” holds a NUL character"
		if r.status != http.StatusBadRequest || !strings.HasPrefix(text(r, "error-message"), want) {
			t.Errorf("GET %s: %d %q, want 400 %q…", path, r.status, text(r, "error-message"), want)
		}
	}

	inst := "/console/instances/" + f.pullHeld
	action, form := formOf(t, b.mustGet(inst+"/stop", 200), "stop-form")
	for _, reason := range []string{"disk\x00full", "disk \xff full"} {
		form.Set("reason", reason)
		if r := b.do("POST", action, form); r.status != http.StatusBadRequest || !strings.Contains(text(r, "error-message"), "“reason”") {
			t.Errorf("stop with reason %q: %d %q", reason, r.status, text(r, "error-message"))
		}
	}
	if f.status(t, f.pullHeld) != "held" || f.auditCount(t, f.pullHeld, "stop") != 0 {
		t.Fatal("a refused stop changed something")
	}

	fr := signedIn(t, f.env.URL, "fr", f.env.Operator)
	if r := fr.get("/console/instances?process=%00"); r.status != http.StatusBadRequest || !strings.HasPrefix(text(r, "error-message"), "Le champ «\u202fprocess\u202f»") {
		t.Errorf("French: %d %q", r.status, text(r, "error-message"))
	}
}

// holdFromBirth starts an instance of a scoring process that holds on any
// error with a crm_id longer than score_company accepts: its occurrence
// fails at creation (invalid_inputs, no attempt) and holds the instance,
// which a retry cannot offer again (409 not_retryable). It returns the
// instance.
func (f *fixture) holdFromBirth(t *testing.T) string {
	t.Helper()
	env := f.env
	env.Process("strict_scoring", map[string]any{
		"inputs": map[string]any{"fields": []any{map[string]any{"name": "crm_id", "type": "text", "required": true}}},
		"start":  "score",
		"nodes": map[string]any{
			"score": map[string]any{"kind": "pull", "definition": "score_company", "revision": 1,
				"inputs":   map[string]any{"crm_id": map[string]any{"from": "input.crm_id"}, "country": map[string]any{"value": "FR"}},
				"next":     "done",
				"on_error": "hold"},
			"done": map[string]any{"kind": "end"},
		},
	})
	inst := env.Must(201, "POST", "/api/v1/processes/strict_scoring/instances", env.Operator, map[string]any{
		"inputs": map[string]any{"crm_id": strings.Repeat("9", 65)}}).JSON(t)
	if inst["status"] != "held" || inst["error_code"] != "invalid_inputs" {
		t.Fatalf("strict scoring: %v with %v, want held with invalid_inputs", inst["status"], inst["error_code"])
	}
	return inst["id"].(string)
}

// TestBulkByErrorCode: the instances list filters by error code, a bulk
// action's confirmation breaks its count down by process and error code
// (each group linking to its instances), and a bulk action on one error
// code carries it through its form and leaves the others held.
func TestBulkByErrorCode(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	f.holdScoring(t, "lead-8")
	apiCount := func(query string) int {
		return len(f.env.Must(200, "GET", "/api/v1/instances?"+query, f.env.Operator, nil).JSON(t)["items"].([]any))
	}
	scorerDown, unavailable := apiCount("status=held&error_code=SCORER_DOWN"), apiCount("status=held&error_code=destination_http_503")
	if scorerDown < 2 || unavailable != 2 {
		t.Fatalf("fixture: %d SCORER_DOWN and %d destination_http_503 held, want at least 2 and 2", scorerDown, unavailable)
	}
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		if got := count(b.mustGet("/console/instances?error_code=SCORER_DOWN", 200), "instance-row"); got != scorerDown {
			t.Errorf("%s: %d instances listed with error code SCORER_DOWN, want %d", lang, got, scorerDown)
		}
		confirm := b.mustGet("/console/instances/bulk?action=abandon&status=held", 200)
		if got, want := text(confirm, "bulk-groups"), []string{"By process and error code", "Par processus et code d’erreur"}[i]; !strings.HasPrefix(got, want) {
			t.Errorf("%s: breakdown %q, want it captioned %q", lang, got, want)
		}
		total := 0
		groups := map[string]int{}
		confirm.doc.Find(`[data-testid=bulk-group]`).Each(func(_ int, row *goquery.Selection) {
			cells := row.Children()
			n, err := strconv.Atoi(strings.TrimSpace(cells.Eq(2).Text()))
			if err != nil {
				t.Errorf("%s: group count %q", lang, cells.Eq(2).Text())
			}
			total += n
			groups[strings.TrimSpace(cells.Eq(0).Text())+"/"+strings.TrimSpace(cells.Eq(1).Text())] = n
			href, _ := cells.Eq(2).Find("a").Attr("href")
			if listed := count(b.mustGet(href, 200), "instance-row"); listed != n {
				t.Errorf("%s: the group of %d links to a list of %d (%s)", lang, n, listed, href)
			}
		})
		if got, _ := confirm.doc.Find(`[data-testid=bulk-count]`).Attr("data-count"); got != strconv.Itoa(total) {
			t.Errorf("%s: the groups add up to %d, the count is %s", lang, total, got)
		}
		if groups["scoring/SCORER_DOWN"] != scorerDown || groups["checkout/destination_http_503"] != 2 {
			t.Errorf("%s: groups %v, want scoring/SCORER_DOWN %d and checkout/destination_http_503 2", lang, groups, scorerDown)
		}
	}

	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	list := b.mustGet("/console/instances?status=held&error_code=destination_http_503", 200)
	href, _ := list.doc.Find(`[data-testid=bulk-abandon]`).Attr("href")
	confirm := b.mustGet(href, 200)
	if got, _ := confirm.doc.Find(`[data-testid=bulk-count]`).Attr("data-count"); got != "2" {
		t.Fatalf("bulk abandon of destination_http_503: count %q, want 2", got)
	}
	action, form := formOf(t, confirm, "bulk-form")
	if form.Get("error_code") != "destination_http_503" {
		t.Fatalf("the bulk form carries %v, want the error code", form)
	}
	form.Set("reason", "payment provider gone")
	if done := b.do("POST", action, form); done.status != http.StatusSeeOther {
		t.Fatalf("bulk abandon: %d %.300s", done.status, done.body)
	}
	if n := apiCount("status=held&error_code=SCORER_DOWN"); n != scorerDown {
		t.Errorf("%d SCORER_DOWN instances held after abandoning destination_http_503, want %d", n, scorerDown)
	}
	if n := apiCount("status=held&error_code=destination_http_503"); n != 0 {
		t.Errorf("%d destination_http_503 instances still held, want 0", n)
	}
}

// TestBulkRetryLeavesOutWhatCannotBeRetried: the bulk retry's count leaves
// out a held instance whose occurrence failed before any attempt and says
// so; applied, every counted instance is retried and none is reported as
// "skipped: it changed after the count".
func TestBulkRetryLeavesOutWhatCannotBeRetried(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	birth := f.holdFromBirth(t)
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		confirm := b.mustGet("/console/instances/bulk?action=retry&status=held", 200)
		if got, _ := confirm.doc.Find(`[data-testid=bulk-count]`).Attr("data-count"); got != "3" {
			t.Fatalf("%s: bulk retry count %q, want 3 (the instance held from birth left out)", lang, got)
		}
		want := []string{"1 more held instance failed before any attempt", "1 autre instance bloquée a échoué avant toute tentative"}[i]
		if got := text(confirm, "bulk-left-out"); !strings.HasPrefix(got, want) {
			t.Errorf("%s: left-out notice %q, want %q…", lang, got, want)
		}
	}
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	action, form := formOf(t, b.mustGet("/console/instances/bulk?action=retry&status=held", 200), "bulk-form")
	form.Set("reason", "services are back")
	done := b.do("POST", action, form)
	if done.status != http.StatusSeeOther {
		t.Fatalf("bulk retry: %d %.300s", done.status, done.body)
	}
	if got := text(b.mustGet(done.header.Get("Location"), 200), "flash"); got != "Bulk retry applied to 3 instances." {
		t.Errorf("result notice %q, want 3 applied and nothing skipped", got)
	}
	if s := f.status(t, birth); s != "held" || f.auditCount(t, birth, "retry") != 0 {
		t.Errorf("the instance held from birth is %s with %d retries, want held with none", s, f.auditCount(t, birth, "retry"))
	}
}

// TestRetryIsNotOfferedWhenItCannotApply: a held instance whose occurrence
// failed before any attempt offers abandon and stop but not retry, and
// says why in both languages; its retry confirmation (a bookmark, an old
// link) goes back to the instance with the same reason instead of a form
// the engine would refuse.
func TestRetryIsNotOfferedWhenItCannotApply(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	inst := "/console/instances/" + f.holdFromBirth(t)
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		page := b.mustGet(inst, 200)
		if count(page, "retry-instance") != 0 || count(page, "abandon-instance") != 1 || count(page, "stop-instance") != 1 {
			t.Errorf("%s: offers retry %d, abandon %d, stop %d; want 0, 1, 1", lang,
				count(page, "retry-instance"), count(page, "abandon-instance"), count(page, "stop-instance"))
		}
		why := []string{"It cannot be retried: its occurrence at node score failed before any attempt",
			"Elle ne peut pas être reprise\u202f: son occurrence au nœud score a échoué avant toute tentative"}[i]
		if got := text(page, "actions-intro"); !strings.Contains(got, why) {
			t.Errorf("%s: actions intro %q, want it to say %q", lang, got, why)
		}
		r := b.get(inst + "/retry")
		if r.status != http.StatusSeeOther || r.header.Get("Location") != inst {
			t.Fatalf("%s: retry confirmation: %d to %q, want a redirect to the instance", lang, r.status, r.header.Get("Location"))
		}
		flash := []string{"This instance cannot be retried: its occurrence at node score failed before any attempt",
			"Cette instance ne peut pas être reprise\u202f: son occurrence au nœud score a échoué avant toute tentative"}[i]
		if got := text(b.mustGet(inst, 200), "flash"); !strings.HasPrefix(got, flash) {
			t.Errorf("%s: flash %q, want %q…", lang, got, flash)
		}
	}
	// A held instance that failed after an attempt still offers retry.
	page := signedIn(t, f.env.URL, "en", f.env.Operator).mustGet("/console/instances/"+f.pullHeld, 200)
	if count(page, "retry-instance") != 1 {
		t.Error("a retryable held instance no longer offers retry")
	}
}

// TestReasonLimitIsInCharacters: the console's reason holds 1,000
// characters as its hint and textarea say, however many bytes they take
// (900 "é" are 1,800 bytes, a line break sent as CR LF is one), and the
// French hint groups 1 000 with a no-break space.
func TestReasonLimitIsInCharacters(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "fr", f.env.Operator)
	inst := "/console/instances/" + f.pullHeld
	confirm := b.mustGet(inst+"/stop", 200)
	if max, _ := confirm.doc.Find(`[data-testid=stop-reason]`).Attr("maxlength"); max != "1000" {
		t.Errorf("textarea maxlength %q, want 1000", max)
	}
	if hint := confirm.doc.Find(`#action-reason-hint`).Text(); !strings.Contains(hint, "1\u202f000 caractères") {
		t.Errorf("French hint %q, want 1\u202f000 caractères (a narrow no-break space)", hint)
	}
	action, form := formOf(t, confirm, "stop-form")
	form.Set("reason", strings.Repeat("é", 900))
	if r := b.do("POST", action, form); r.status != http.StatusSeeOther {
		t.Fatalf("stop with 900 characters (1,800 bytes): %d %q, want a redirect", r.status, text(r, "stop-error"))
	}
	if f.status(t, f.pullHeld) != "cancelled" {
		t.Error("the stop was not applied")
	}
	// A browser sends the textarea's line breaks as CR LF: 1,000
	// characters as maxlength counted them are 1,200 sent.
	other := "/console/instances/" + f.pushHeld[0]
	action, form = formOf(t, b.mustGet(other+"/stop", 200), "stop-form")
	form.Set("reason", strings.Repeat("line\r\n", 200))
	if r := b.do("POST", action, form); r.status != http.StatusSeeOther {
		t.Fatalf("stop with 200 lines (1,000 characters in the textarea): %d %q, want a redirect", r.status, text(r, "stop-error"))
	}
}

// TestTooLongReasonIsSaidSo: a reason over the limit is refused with its
// length and the limit (one instance's action and a bulk one alike), not
// as if none were given; an empty one is still asked for.
func TestTooLongReasonIsSaidSo(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		long := strings.Repeat("é", 1234)
		tooLong := []string{"The reason is too long: 1,234 characters, for at most 1,000. Shorten it. Nothing was done.",
			"Le motif est trop long\u202f: 1\u202f234 caractères, pour 1\u202f000 au plus. Raccourcissez-le. Rien n’a été fait."}[i]
		empty := []string{"Give a reason: it is recorded in the audit log (at most 1,000 characters). Nothing was done.",
			"Indiquez un motif\u202f: il est consigné dans le journal d’audit (1\u202f000 caractères au plus). Rien n’a été fait."}[i]
		for _, a := range []string{"retry", "abandon", "stop"} {
			action, form := formOf(t, b.mustGet("/console/instances/"+f.pullHeld+"/"+a, 200), a+"-form")
			for reason, want := range map[string]string{long: tooLong, " ": empty} {
				form.Set("reason", reason)
				r := b.do("POST", action, form)
				if got := text(r, a+"-error"); r.status != http.StatusBadRequest || got != want {
					t.Errorf("%s %s with %d characters: %d %q, want %q", lang, a, len([]rune(reason)), r.status, got, want)
				}
				if inv, _ := r.doc.Find(`[data-testid=` + a + `-reason]`).Attr("aria-invalid"); inv != "true" {
					t.Errorf("%s %s with %d characters: the reason is not marked invalid", lang, a, len([]rune(reason)))
				}
			}
		}
		action, form := formOf(t, b.mustGet("/console/instances/bulk?action=stop&process=checkout&status=held", 200), "bulk-form")
		for reason, want := range map[string]string{long: tooLong, "": empty} {
			form.Set("reason", reason)
			r := b.do("POST", action, form)
			if got := text(r, "bulk-error"); r.status != http.StatusBadRequest || got != want {
				t.Errorf("%s bulk stop with %d characters: %d %q, want %q", lang, len([]rune(reason)), r.status, got, want)
			}
		}
	}
	if s := f.status(t, f.pullHeld); s != "held" {
		t.Errorf("instance %s after refused reasons", s)
	}
}

// TestARefusedActionIsNotOfferedAgain: a retry posted twice (a double
// click, a reload) is refused the second time with what happened, keeping
// the reason typed, and the page neither names an empty node nor offers
// the form again; a stale retry of an instance that cannot be retried is
// answered the same way.
func TestARefusedActionIsNotOfferedAgain(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	birth := "/console/instances/" + f.holdFromBirth(t)
	inst := "/console/instances/" + f.pullHeld
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		var action string
		var form url.Values
		if i == 0 {
			action, form = formOf(t, b.mustGet(inst+"/retry", 200), "retry-form")
			form.Set("reason", "scorer redeployed")
			if r := b.do("POST", action, form); r.status != http.StatusSeeOther {
				t.Fatalf("retry: %d %.300s", r.status, r.body)
			}
		} else {
			action, form = inst+"/retry", url.Values{"csrf": {csrfOf(t, b.mustGet(inst, 200))}, "reason": {"scorer redeployed"}}
		}
		again := b.do("POST", action, form)
		want := []string{"This instance is no longer held (it is running now)", "Cette instance n’est plus bloquée (elle est en cours désormais)"}[i]
		if again.status != http.StatusConflict || !strings.HasPrefix(text(again, "retry-error"), want) {
			t.Errorf("%s: retry posted again: %d %q, want 409 %q…", lang, again.status, text(again, "retry-error"), want)
		}
		if count(again, "retry-form") != 0 || count(again, "retry-question") != 0 || strings.Contains(again.body, "node  ") || strings.Contains(again.body, "nœud  ") {
			t.Errorf("%s: the refused retry still offers the form (%d) or its question (%q)", lang, count(again, "retry-form"), text(again, "retry-question"))
		}
		if got := text(again, "retry-reason"); got != "scorer redeployed" {
			t.Errorf("%s: the reason typed is lost: %q", lang, got)
		}
		if href, _ := again.doc.Find(`[data-testid=cancel-retry]`).Attr("href"); href != inst {
			t.Errorf("%s: way back %q, want %s", lang, href, inst)
		}
		stale := b.do("POST", birth+"/retry", url.Values{"csrf": {csrfOf(t, again)}, "reason": {"try"}})
		if stale.status != http.StatusConflict || count(stale, "retry-form") != 0 || text(stale, "retry-error") == "" {
			t.Errorf("%s: a retry of an instance that cannot be retried: %d, form %d, error %q", lang, stale.status, count(stale, "retry-form"), text(stale, "retry-error"))
		}
	}
	if n := f.auditCount(t, f.pullHeld, "retry"); n != 1 {
		t.Errorf("%d retry records, want 1", n)
	}
}

// TestLabelsSayWhatApplies: a bulk stop over held (or running) instances,
// by their status, where they are held or their error code, says held (or
// running), not "running or held"; an occurrence retried by
// an operator says its budget counts from that retry; an instance held
// again after a retry no longer shows "Retried by" above its status.
func TestLabelsSayWhatApplies(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	for status, want := range map[string][2]string{
		"held":    {"Stop every held instance…", "3 held instances match now."},
		"running": {"Stop every running instance…", "running instance"},
		"":        {"Stop every running or held instance…", "running or held instances match now."},
	} {
		list := b.mustGet("/console/instances?status="+status, 200)
		if got := text(list, "bulk-stop"); got != want[0] {
			t.Errorf("status=%s: bulk link %q, want %q", status, got, want[0])
		}
		href, _ := list.doc.Find(`[data-testid=bulk-stop]`).Attr("href")
		confirm := b.mustGet(href, 200)
		if got := text(confirm, "bulk-count"); !strings.Contains(got, want[1]) {
			t.Errorf("status=%s: bulk count %q, want %q", status, got, want[1])
		}
		// Only a status narrows these: the page warns that every process's
		// instances are concerned.
		if got := text(confirm, "bulk-unfiltered"); !strings.Contains(got, "every process") {
			t.Errorf("status=%s: unfiltered warning %q", status, got)
		}
	}

	// Where they are held, or the code they failed with, keeps held ones
	// alone (a stop acts on no failed instance, and a running one has no
	// code): not "running or held" (QA).
	for query, want := range map[string]string{
		"held_at=charge_card":    "2 held instances match now.",
		"error_code=SCORER_DOWN": "1 held instance",
		"process=scoring":        "running or held",
	} {
		list := b.mustGet("/console/instances?"+query, 200)
		wantLabel := "Stop every held instance…"
		if strings.HasPrefix(query, "process=") {
			wantLabel = "Stop every running or held instance…"
		}
		if got := text(list, "bulk-stop"); got != wantLabel {
			t.Errorf("%s: bulk link %q, want %q", query, got, wantLabel)
		}
		href, _ := list.doc.Find(`[data-testid=bulk-stop]`).Attr("href")
		if got := text(b.mustGet(href, 200), "bulk-count"); !strings.Contains(got, want) {
			t.Errorf("%s: bulk count %q, want %q", query, got, want)
		}
	}

	// Retried, then failed again: held, with 2 attempts of a budget of 2.
	f.env.Must(200, "POST", "/api/v1/instances/"+f.pullHeld+"/retry", f.env.Operator, map[string]any{"reason": "scorer redeployed"})
	f.failScoring(t, f.pullHeldOcc)
	inst := "/console/instances/" + f.pullHeld
	page := b.mustGet(inst, 200)
	if text(page, "instance-status") != "held" || count(page, "attribution") != 0 {
		t.Errorf("held again after a retry: status %q, banner %q; want held and no “Retried by”", text(page, "instance-status"), text(page, "attribution"))
	}
	if got := text(page, "instance-history"); !strings.Contains(got, "scorer redeployed") {
		t.Errorf("the retry left the history: %q", got)
	}
	f.env.Must(200, "POST", "/api/v1/instances/"+f.pullHeld+"/retry", f.env.Operator, map[string]any{"reason": "again"})
	if got := text(b.mustGet(inst, 200), "attribution"); !strings.HasPrefix(got, "Retried by operator at ") || !strings.Contains(got, "again") || strings.Contains(got, "scorer redeployed") {
		t.Errorf("running after a retry: banner %q, want the latest retry only", got)
	}
	occ := b.mustGet("/console/occurrences/"+f.pullHeldOcc, 200)
	if got, want := text(occ, "attempts-summary"), "2 attempts · at most 2 since the last operator retry · 2 left"; got != want {
		t.Errorf("budget line %q, want %q", got, want)
	}
}

// TestAuditRecordsOfDeletedInstances: once retention deleted an instance,
// its audit records stay and show it as deleted, without a link to a page
// that no longer exists; records of live instances still link.
func TestAuditRecordsOfDeletedInstances(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	// A negative retention puts the cutoff after now: every ended
	// instance goes, the stopped order among them.
	if n, err := f.env.Engine.DeleteEnded(context.Background(), -time.Minute); err != nil || n == 0 {
		t.Fatalf("retention deleted %d instances: %v", n, err)
	}
	f.env.Must(200, "POST", "/api/v1/instances/"+f.pullHeld+"/stop", f.env.Operator, map[string]any{"reason": "still here"})
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		b.mustGet("/console/instances/"+f.stopped, 404)
		page := b.mustGet("/console/audit", 200)
		found := 0
		page.doc.Find(`[data-testid=audit-row]`).Each(func(_ int, row *goquery.Selection) {
			target := row.Find(`[data-testid=audit-instance]`)
			id, _ := target.Attr("data-id")
			href, linked := target.Attr("href")
			deleted := collapse(row.Find(`[data-testid=audit-deleted]`).Text())
			switch id {
			case f.stopped:
				found++
				if linked || deleted != []string{"(deleted)", "(supprimée)"}[i] {
					t.Errorf("%s: record of the deleted instance links to %q, says %q", lang, href, deleted)
				}
			case f.pullHeld:
				found++
				if href != "/console/instances/"+f.pullHeld || deleted != "" {
					t.Errorf("%s: record of a live instance: link %q, says %q", lang, href, deleted)
				}
			}
		})
		if found != 2 {
			t.Errorf("%s: %d of the 2 records found", lang, found)
		}
	}
}

// TestStopAlreadyStoppedIsAWarning: stopping an instance someone else has
// just stopped changes nothing; the page says so as a warning, not as a
// success, with the reason typed shown as not recorded.
func TestStopAlreadyStoppedIsAWarning(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	inst := "/console/instances/" + f.runInst
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		form := url.Values{"reason": {"my own reason"}}
		if i == 0 {
			// The confirmation's form, opened before someone else stopped
			// the instance, carries the action it saw (none).
			page := b.mustGet(inst+"/stop", 200)
			form.Set("csrf", csrfOf(t, page))
			form.Set("last_action", page.doc.Find(`input[name=last_action]`).AttrOr("value", "missing"))
			f.env.Must(200, "POST", "/api/v1/instances/"+f.runInst+"/stop", f.env.Operator, map[string]any{"reason": "stopped elsewhere"})
		} else {
			form.Set("csrf", csrfOf(t, b.mustGet(inst, 200)))
		}
		r := b.do("POST", inst+"/stop", form)
		if r.status != http.StatusSeeOther {
			t.Fatalf("%s: late stop: %d, want 303", lang, r.status)
		}
		after := b.mustGet(r.header.Get("Location"), 200)
		box := after.doc.Find(`[data-testid=flash-notice]`)
		// In English the page was opened before the other stop, which the
		// notice names; in French after it.
		got := text(after, "flash")
		named := strings.HasPrefix(got, "This instance was already stopped, by ") && strings.HasSuffix(got, " UTC; nothing changed and nothing was recorded.")
		if i == 1 {
			named = got == "Cette instance était déjà arrêtée\u202f; rien n’a changé et rien n’a été consigné."
		}
		if !box.HasClass("warning") || box.HasClass("ok") || !named {
			t.Errorf("%s: after a late stop: notice class %q, text %q", lang, box.AttrOr("class", ""), text(after, "flash"))
		}
		if got := text(after, "flash-reason"); got != "my own reason" || !strings.Contains(box.Text(), []string{"not recorded", "non consigné"}[i]) {
			t.Errorf("%s: the late stop's reason shows as %q in %q", lang, got, box.Text())
		}
		if n := f.auditCount(t, f.runInst, "stop"); n != 1 {
			t.Errorf("%s: %d stop records, want 1", lang, n)
		}
	}
}

// TestLongBulkActionLinksToItsRecords: a bulk action expected to take a
// while says so and links to its audit records before it runs, under the
// id it then runs as; those records say how many instances it changed so
// far. A short one shows no such warning.
func TestLongBulkActionLinksToItsRecords(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	f.holdScoring(t, "lead-8")
	const list = "/console/instances/bulk?action=abandon&process=scoring&status=held"

	short := signedIn(t, f.env.URL, "en", f.env.Operator).mustGet(list, 200)
	if n := count(short, "bulk-long"); n != 0 {
		t.Errorf("a bulk action of 2 instances warns of a long wait: %q", text(short, "bulk-long"))
	}

	c := console.New(slog.New(slog.DiscardHandler), f.env.Engine)
	console.SetBulkCost(c, time.Hour)
	r := chi.NewRouter()
	r.Mount("/console", c.Handler())
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	for _, lang := range []string{"fr", "en"} {
		b := signedIn(t, srv.URL, lang, f.env.Operator)
		confirm := b.mustGet(list, 200)
		want := map[string]string{"en": "This takes about 2 h.", "fr": "Cela prend environ 2 h."}[lang]
		if got := text(confirm, "bulk-long"); !strings.HasPrefix(got, want) {
			t.Errorf("%s: long wait %q, want it to start %q", lang, got, want)
		}
		action, form := formOf(t, confirm, "bulk-form")
		follow, _ := confirm.doc.Find(`[data-testid=bulk-follow]`).Attr("href")
		if form.Get("bulk_id") == "" || follow != "/console/audit?bulk="+form.Get("bulk_id") {
			t.Fatalf("%s: follow link %q for the form's bulk id %q", lang, follow, form.Get("bulk_id"))
		}
		if lang == "fr" {
			continue // the English page applies it
		}
		// Refused (no reason), the page keeps the id a tab may follow.
		refused := b.do("POST", action, form)
		if _, again := formOf(t, refused, "bulk-form"); refused.status != http.StatusBadRequest || again.Get("bulk_id") != form.Get("bulk_id") {
			t.Errorf("a refused bulk form: %d, bulk id %q, want 400 keeping %q", refused.status, again.Get("bulk_id"), form.Get("bulk_id"))
		}
		form.Set("reason", "scorer retired")
		done := b.do("POST", action, form)
		if done.status != http.StatusSeeOther || done.header.Get("Location") != follow {
			t.Fatalf("bulk abandon: %d to %q, want the link shown before, %q", done.status, done.header.Get("Location"), follow)
		}
		records := b.mustGet(follow, 200)
		if got := text(records, "bulk-scope"); !strings.HasPrefix(got, "Bulk abandon by operator") || !strings.Contains(got, "applied to every instance counted (2). It ended") {
			t.Errorf("bulk records say %q", got)
		}
	}
}

// TestActionThatNoLongerAppliesNamesWhoActed: a colleague abandoned the
// instance through the API while a retry's confirmation was open; the
// form's refusal names who did what, as the confirmation's stale link
// does, with the instance's new status.
func TestActionThatNoLongerAppliesNamesWhoActed(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	id := f.pushHeld[0]
	href, _ := b.mustGet("/console/instances/"+id, 200).doc.Find(`[data-testid=retry-instance]`).Attr("href")
	if !strings.Contains(href, "seen=0") {
		t.Fatalf("the retry link %q does not say the page showed no action", href)
	}
	action, form := formOf(t, b.mustGet(href, 200), "retry-form")
	f.env.Must(200, "POST", "/api/v1/instances/"+id+"/abandon", f.env.Admin, map[string]any{"reason": "customer left"})
	want := "This instance is no longer held (it is failed now): someone acted on it after this page was opened (abandon by "
	form.Set("reason", "try again")
	r := b.do("POST", action, form)
	if r.status != http.StatusConflict || !strings.HasPrefix(text(r, "retry-error"), want) || count(r, "retry-form") != 0 {
		t.Errorf("retry after a colleague's abandon: %d %q (%d forms), want 409 %q… and no form", r.status, text(r, "retry-error"), count(r, "retry-form"), want)
	}
	back := b.get(href)
	if back.status != http.StatusSeeOther || back.header.Get("Location") != "/console/instances/"+id {
		t.Fatalf("the stale retry link: %d to %q, want 303 back to the instance", back.status, back.header.Get("Location"))
	}
	if got := text(b.mustGet("/console/instances/"+id, 200), "flash"); !strings.HasPrefix(got, want) {
		t.Errorf("after the stale retry link the instance page says %q, want %q…", got, want)
	}
}

// The audit log is read by who acted: each name links to its records, and
// the filter keeps only them.
func TestAuditLogByWho(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	f.env.Must(200, "POST", "/api/v1/instances/"+f.pullHeld+"/stop", f.env.Operator, map[string]any{"reason": "still here"})
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	page := b.mustGet("/console/audit", 200)
	href := ""
	page.doc.Find(`[data-testid=audit-who] a`).Each(func(_ int, a *goquery.Selection) {
		if a.Text() == "ops-alice" {
			href, _ = a.Attr("href")
		}
	})
	if href != "/console/audit?actor=ops-alice" {
		t.Fatalf("ops-alice's name links to %q", href)
	}
	mine := b.mustGet(href, 200)
	if n := count(mine, "audit-row"); n != 1 || text(mine, "audit-who") != "ops-alice" {
		t.Errorf("ops-alice's records: %d rows, who %q", n, text(mine, "audit-who"))
	}
	if v, _ := mine.doc.Find(`[data-testid=filter-actor]`).Attr("value"); v != "ops-alice" {
		t.Errorf("the Who field holds %q", v)
	}
	// By business key (the fixture's stopped instance is lead-7's): its
	// records only, none of the others'.
	byKey := b.mustGet("/console/audit?business_key=lead-7", 200)
	if n, all := count(byKey, "audit-row"), count(page, "audit-row"); n != 1 || all <= n {
		t.Errorf("lead-7's records: %d rows of %d, want its one stop", n, all)
	}
	if v, _ := byKey.doc.Find(`[data-testid=filter-business-key]`).Attr("value"); v != "lead-7" {
		t.Errorf("the Business key field holds %q", v)
	}
}

// The audit log is read by the days operators acted, in the operator's
// time zone.
func TestAuditLogByDay(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	f.env.Must(200, "POST", "/api/v1/instances/"+f.pullHeld+"/stop", f.env.Operator, map[string]any{"reason": "still here"})
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	all := count(b.mustGet("/console/audit", 200), "audit-row")
	if all == 0 {
		t.Fatal("the fixture's audit log is empty")
	}
	now := time.Now()
	around := "/console/audit?acted_from=" + now.AddDate(0, 0, -1).Format(time.DateOnly) + "&acted_to=" + now.AddDate(0, 0, 1).Format(time.DateOnly)
	page := b.mustGet(around, 200)
	if n := count(page, "audit-row"); n != all {
		t.Errorf("the days around today: %d rows, want all %d", n, all)
	}
	if v, _ := page.doc.Find(`[data-testid=filter-acted-from]`).Attr("value"); v != now.AddDate(0, 0, -1).Format(time.DateOnly) {
		t.Errorf("the from field holds %q", v)
	}
	if old := b.mustGet("/console/audit?acted_to=2020-01-01", 200); count(old, "audit-row") != 0 || count(old, "empty") != 1 {
		t.Errorf("days before any action: %d rows, %d empty notes", count(old, "audit-row"), count(old, "empty"))
	}
	if bad := b.mustGet("/console/audit?acted_from=yesterday", 400); !strings.Contains(text(bad, "filter-errors"), "2026-12-01") {
		t.Errorf("a day that is not one: %q", text(bad, "filter-errors"))
	}
}

// A bulk action's page says how far it got from its record: one running
// without progress for minutes was left by a replica that stopped, one an
// error stopped says so; both say what to do.
func TestBulkRecordOnItsPage(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	ctx := context.Background()
	for id, row := range map[string]string{
		"0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e01": "now() - interval '10 minutes', now() - interval '9 minutes', null, false",
		"0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e02": "now() - interval '10 minutes', now() - interval '9 minutes', now() - interval '9 minutes', true",
		"0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e03": "now(), now(), null, false",
	} {
		if _, err := f.env.Pool.Exec(ctx, `insert into bulk_actions (id, action, reason, actor_name, filter, matched, applied, skipped, started_at, progressed_at, ended_at, stopped)
values ('`+id+`', 'retry', 'crm back', 'ops-bob', '{}', 900, 300, 2, `+row+`)`); err != nil {
			t.Fatal(err)
		}
	}
	for _, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		for id, want := range map[string]map[string][]string{
			"0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e01": {"en": {"is running: 302 of the 900", "No progress since"}, "fr": {"en cours — instances comptées\u202f: 900, traitées jusqu’ici\u202f: 302", "Aucun progrès depuis"}},
			"0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e02": {"en": {"was stopped by an error after 300 of the 900", "act on the filter again"}, "fr": {"arrêtée par une erreur"}},
			"0193a5c4-6b2e-7c3d-9e4f-5a6b7c8d9e03": {"en": {"is running: 302 of the 900"}, "fr": {"en cours —"}},
		} {
			got := text(b.mustGet("/console/audit?bulk="+id, 200), "bulk-scope")
			for _, w := range want[lang] {
				if !strings.Contains(got, w) {
					t.Errorf("%s: bulk %s says %q, want %q in it", lang, id[len(id)-2:], got, w)
				}
			}
			if strings.HasSuffix(id, "03") && strings.Contains(got, map[string]string{"en": "No progress", "fr": "Aucun progrès"}[lang]) {
				t.Errorf("%s: a bulk action that progressed just now is said stalled: %q", lang, got)
			}
		}
		// An id no bulk action has (a mangled link) is not shown as one
		// that changed nothing.
		unknown := b.mustGet("/console/audit?bulk=11111111-2222-7333-8444-555555555555", http.StatusNotFound)
		if got := unknown.body; !strings.Contains(got, map[string]string{"en": "No bulk action has the id", "fr": "Aucune action groupée n’a l’identifiant"}[lang]) ||
			strings.Contains(got, `data-testid="bulk-scope"`) {
			t.Errorf("%s: an unknown bulk action's page: %s", lang, got)
		}
	}
}

// Text staff write (a definition's name and descriptions, an operator's
// reason) is shown as stored: a character that reorders text (U+202E)
// is named, as in values and workers' messages (security QA: "dup
// \u202eredro" read reversed on the instance page and the audit log).
func TestStaffTextShowsWhatReordersIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	env := f.env
	const rlo = "\u202e"
	env.Must(201, "PUT", "/api/v1/definitions/bidi_def/working", env.Designer, map[string]any{
		"name": "invoice " + rlo + "fdp.exe", "description": "see " + rlo + "fdp.exe",
		"inputs":  map[string]any{"fields": []any{map[string]any{"name": "a", "type": "text", "description": "the " + rlo + "fdp.exe"}}},
		"outputs": map[string]any{"fields": []any{}}})
	env.Must(200, "POST", "/api/v1/instances/"+f.runInst+"/stop", env.Admin, map[string]any{"reason": "dup " + rlo + "redro"})
	b := signedIn(t, env.URL, "en", env.Admin)
	for _, page := range []string{"/console/definitions", "/console/definitions/bidi_def", "/console/instances/" + f.runInst, "/console/audit"} {
		r := b.mustGet(page, 200)
		if strings.Contains(r.body, rlo) {
			t.Errorf("%s shows U+202E raw", page)
		}
		if !strings.Contains(r.body, "⟨U+202E⟩") {
			t.Errorf("%s does not name U+202E", page)
		}
	}
}

// Retrying a push call that may have been carried out (its answer lost,
// or too late) warns where it is confirmed, one instance or a filter's;
// one its destination refused (503: nothing done) does not (operator QA:
// only the stop's page warned of a card charged).
func TestRetryWarnsOfACallThatMayHaveActed(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	env := f.env
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	env.Must(201, "PUT", "/api/v1/destinations/slowpay", env.Admin, map[string]any{"url": slow.URL, "max_timeout": "PT1S"})
	checkout := relaistest.Body(relaistest.ExampleDocs(t, "processes/checkout.yaml")[0], "key")
	charge := checkout["nodes"].(map[string]any)["charge"].(map[string]any)
	charge["destination"], charge["timeout"] = "slowpay", "PT0.2S"
	env.Process("slow_checkout", checkout)
	id := env.Must(201, "POST", "/api/v1/processes/slow_checkout/instances", env.Operator, map[string]any{"business_key": "order-slow",
		"inputs": map[string]any{"order_id": "order-slow", "amount_cents": 4200, "currency": "EUR", "card_token": "tok_visa_4242",
			"cardholder": map[string]any{"name": "Jo", "email": "jo@example.com"}}}).JSON(t)["id"].(string)
	relaistest.WaitFor(t, 10*time.Second, "the slow order held", func() (bool, string) {
		s := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)["status"].(string)
		return s == "held", s
	})
	for _, lang := range []string{"en", "fr"} {
		want := map[string]string{"en": "may have been carried out all the same", "fr": "a peut-être été exécuté malgré tout"}[lang]
		b := signedIn(t, env.URL, lang, env.Operator)
		if got := b.mustGet("/console/instances/"+id+"/retry", 200).body; !strings.Contains(got, want) {
			t.Errorf("%s: the retry of a call that timed out does not warn that it may have acted", lang)
		}
		if got := b.mustGet("/console/instances/"+f.pushHeld[0]+"/retry", 200).body; strings.Contains(got, want) {
			t.Errorf("%s: the retry of a call its destination refused (503) warns that it may have acted", lang)
		}
		// Counted over every held instance the filter matches, not only
		// the groups the page lists (verifier QA), one said as one.
		for _, page := range []string{"/console/instances/bulk?action=retry&status=held&error_code=deadline_exceeded", "/console/instances/bulk?action=retry&status=held"} {
			got := text(b.mustGet(page, 200), "bulk-may-have-acted")
			if one := map[string]string{"en": "1 of them is held", "fr": "1 d’entre elles est bloquée"}[lang]; !strings.Contains(got, want) || !strings.HasPrefix(got, one) {
				t.Errorf("%s: %s: %q, want a warning for the one call that timed out", lang, page, got)
			}
		}
		if got := text(b.mustGet("/console/instances/bulk?action=retry&status=held&error_code=destination_http_503", 200), "bulk-may-have-acted"); got != "" {
			t.Errorf("%s: the bulk retry of refused calls warns %q", lang, got)
		}
	}

	// A success whose outputs the contract refuses acted (evaluator QA:
	// the example refused an order whose card was charged): held by the
	// example, and its retry warned of.
	sloppy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"outputs":{"outcome":"approved","authorization_code":"A2"}}`))
	}))
	t.Cleanup(sloppy.Close)
	env.Must(201, "PUT", "/api/v1/destinations/sloppypay", env.Admin, map[string]any{"url": sloppy.URL, "max_timeout": "PT5S"})
	charge["destination"], charge["timeout"] = "sloppypay", "PT5S"
	env.Process("sloppy_checkout", checkout)
	id = env.Must(201, "POST", "/api/v1/processes/sloppy_checkout/instances", env.Operator, map[string]any{"business_key": "order-sloppy",
		"inputs": map[string]any{"order_id": "order-sloppy", "amount_cents": 4200, "currency": "EUR", "card_token": "tok_visa_4242",
			"cardholder": map[string]any{"name": "Jo", "email": "jo@example.com"}}}).JSON(t)["id"].(string)
	relaistest.WaitFor(t, 10*time.Second, "the sloppy order held", func() (bool, string) {
		s := env.Must(200, "GET", "/api/v1/instances/"+id, env.Operator, nil).JSON(t)
		return s["status"] == "held", fmt.Sprint(s["status"], " ", s["error_code"])
	})
	for _, lang := range []string{"en", "fr"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		want := map[string]string{"en": "the destination most likely acted", "fr": "la destination a très probablement agi"}[lang]
		if got := b.mustGet("/console/instances/"+id+"/retry", 200).body; !strings.Contains(got, want) {
			t.Errorf("%s: the retry of a call answered with refused outputs does not warn that it acted", lang)
		}
		got := text(b.mustGet("/console/instances/bulk?action=retry&status=held&error_code=invalid_outputs", 200), "bulk-may-have-acted")
		if one := map[string]string{"en": "1 of them is held", "fr": "1 d’entre elles est bloquée"}[lang]; !strings.HasPrefix(got, one) || !strings.Contains(got, "invalid_outputs") {
			t.Errorf("%s: the bulk retry of calls answered with refused outputs warns %q", lang, got)
		}
	}
}

// The bulk stop of running instances warns of the push calls in flight
// among them, as one instance's stop page does (on-call QA: the bulk stop
// of checkouts said nothing of a card that may be charged).
func TestBulkStopWarnsOfCallsInFlight(t *testing.T) {
	t.Parallel()
	env := relaistest.New(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); slow.Close() })
	env.Must(201, "PUT", "/api/v1/destinations/slowpay", env.Admin, map[string]any{"url": slow.URL, "max_timeout": "PT10S"})
	env.Definition("charge_card.yaml")
	checkout := relaistest.Body(relaistest.ExampleDocs(t, "processes/checkout.yaml")[0], "key")
	charge := checkout["nodes"].(map[string]any)["charge"].(map[string]any)
	charge["destination"], charge["timeout"] = "slowpay", "PT9S"
	env.Process("slow_checkout", checkout)
	id := env.Must(201, "POST", "/api/v1/processes/slow_checkout/instances", env.Operator, map[string]any{"business_key": "order-inflight",
		"inputs": map[string]any{"order_id": "order-inflight", "amount_cents": 4200, "currency": "EUR", "card_token": "tok_visa_4242",
			"cardholder": map[string]any{"name": "Jo", "email": "jo@example.com"}}}).JSON(t)["id"].(string)
	relaistest.WaitFor(t, 10*time.Second, "the call in flight", func() (bool, string) {
		for _, o := range env.Must(200, "GET", "/api/v1/occurrences?instance="+id, env.Operator, nil).JSON(t)["items"].([]any) {
			if o.(map[string]any)["status"] == "reserved" {
				return true, ""
			}
		}
		return false, "no reserved occurrence yet"
	})
	// The API's count says it too, for scripts.
	if c := env.Must(200, "POST", "/api/v1/instances/actions", env.Operator, map[string]any{"action": "stop", "reason": "check",
		"filter": map[string]any{"process": "slow_checkout", "status": "running"}}).JSON(t); c["calling_count"] != 1.0 {
		t.Errorf("the API's stop count: %v, want calling_count 1", c)
	}
	for lang, want := range map[string]string{"en": "1 of them is calling a destination now", "fr": "1 d’entre elles appelle une destination en ce moment"} {
		b := signedIn(t, env.URL, lang, env.Operator)
		if got := text(b.mustGet("/console/instances/bulk?action=stop&process=slow_checkout&status=running", 200), "bulk-may-have-acted"); !strings.HasPrefix(got, want) {
			t.Errorf("%s: bulk stop warns %q, want %q", lang, got, want)
		}
		if got := text(b.mustGet("/console/instances/bulk?action=retry&status=held", 200), "bulk-may-have-acted"); got != "" {
			t.Errorf("%s: a retry with no held instance warns %q", lang, got)
		}
	}
}

// A running instance whose occurrence waits out a retry delay offers
// Retry: its confirmation says the occurrence is offered now, its attempts
// left unchanged; a missing reason keeps the form; once done, the
// occurrence is available now and the retry recorded.
func TestRetryNowOfARunningInstance(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	env := f.env
	f.addSlowScoring(t)
	started := env.Must(201, "POST", "/api/v1/processes/slow_scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "CRM-9"}}).JSON(t)
	id, occID := started["id"].(string), started["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	waitAgain := func(delay string) {
		t.Helper()
		got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.scorer, map[string]any{"worker_id": "scorer-1",
			"subscriptions": []any{map[string]any{"definition": "score_company"}}}).JSON(t)["occurrences"].([]any)
		if len(got) != 1 || got[0].(map[string]any)["id"] != occID {
			t.Fatalf("fetched %v, want %s", got, occID)
		}
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+occID+"/fail", f.scorer, map[string]any{"worker_id": "scorer-1",
			"error_code": "SCORER_SLOW", "retryable": true, "retry_delay": delay})
	}
	waitAgain("PT1H")

	b := signedIn(t, env.URL, "en", env.Operator)
	inst := "/console/instances/" + id
	page := b.mustGet(inst, 200)
	if got := text(page, "actions-intro"); !strings.Contains(got, "failed (SCORER_SLOW) and waits for its retry, due ") || !strings.Contains(got, "retry offers it now") {
		t.Errorf("actions intro %q, want it to say the retry waits and can be brought forward", got)
	}
	href, ok := page.doc.Find(`[data-testid=retry-instance]`).Attr("href")
	if !ok || count(page, "stop-instance") != 1 || count(page, "abandon-instance") != 0 {
		t.Fatalf("a running instance waiting for a retry offers retry %v, stop %d, abandon %d", ok, count(page, "stop-instance"), count(page, "abandon-instance"))
	}
	confirm := b.mustGet(href, 200)
	if got := text(confirm, "retry-question"); !strings.HasPrefix(got, "Retry now? The occurrence at node score waits for its retry, due ") {
		t.Errorf("question %q", got)
	}
	fr := signedIn(t, env.URL, "fr", env.Operator).mustGet(href, 200)
	if got := text(fr, "retry-question"); !strings.HasPrefix(got, "Reprendre maintenant\u202f? L’occurrence du nœud score attend sa nouvelle tentative (prévue\u202f: ") {
		t.Errorf("French question %q", got)
	}
	action, form := formOf(t, confirm, "retry-form")
	form.Set("reason", " ")
	if r := b.do("POST", action, form); r.status != http.StatusBadRequest || count(r, "retry-form") != 1 {
		t.Errorf("retry now without a reason: %d, form shown %d times, want 400 with the form kept", r.status, count(r, "retry-form"))
	}
	form.Set("reason", "scorer is fast again")
	r := b.do("POST", action, form)
	if r.status != http.StatusSeeOther {
		t.Fatalf("retry now: %d %.300s", r.status, r.body)
	}
	if got := text(b.mustGet(inst, 200), "flash"); got != "Retried now: the occurrence at node score is offered at once. Recorded in the audit log." {
		t.Errorf("flash %q", got)
	}
	occ := f.occurrence(t, occID)
	at, _ := time.Parse(time.RFC3339Nano, occ["available_at"].(string))
	if occ["status"] != "available" || occ["attempts_left"].(float64) != 5 || time.Until(at) > time.Minute {
		t.Errorf("occurrence after retry now: %v, %v attempts left, available at %v; want available now with its 5 left", occ["status"], occ["attempts_left"], at)
	}
	if n := f.auditCount(t, id, "retry"); n != 1 {
		t.Errorf("%d retry records, want 1", n)
	}
	// The occurrence fails again and waits anew: a form opened before
	// that retry (a colleague's) is refused, naming it, never applied
	// twice (verifier QA: it applied, pulling the next attempt forward).
	waitAgain("PT1H")
	late := b.do("POST", action, form)
	if late.status != http.StatusConflict || !strings.HasPrefix(text(late, "retry-error"), "Someone acted on this instance after this page was opened (retry by operator") {
		t.Errorf("a stale retry now: %d %q, want 409 naming the retry made since", late.status, text(late, "retry-error"))
	}
	if n := f.auditCount(t, id, "retry"); n != 1 {
		t.Errorf("%d retry records after a stale form, want still 1", n)
	}
	// An up-to-date form whose occurrence came due and was taken by a
	// worker meanwhile: said so.
	env.Must(200, "POST", "/api/v1/instances/"+id+"/stop", env.Operator, map[string]any{"reason": "start over"})
	started = env.Must(201, "POST", "/api/v1/processes/slow_scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "CRM-10"}}).JSON(t)
	id, occID = started["id"].(string), started["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	inst = "/console/instances/" + id
	waitAgain("PT1S")
	action, form = formOf(t, b.mustGet(inst+"/retry", 200), "retry-form")
	form.Set("reason", "too late")
	relaistest.WaitFor(t, 5*time.Second, "the retry taken by a worker", func() (bool, string) {
		got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.scorer, map[string]any{"worker_id": "scorer-1",
			"subscriptions": []any{map[string]any{"definition": "score_company"}}}).JSON(t)["occurrences"].([]any)
		return len(got) == 1, fmt.Sprint(got)
	})
	if r := b.do("POST", action, form); r.status != http.StatusConflict || !strings.HasPrefix(text(r, "retry-error"), "None of its occurrences waits for a retry any more") {
		t.Errorf("a retry now of what a worker took meanwhile: %d %q", r.status, text(r, "retry-error"))
	}
}

// A Retry now form posted once a worker's failure held the instance is
// refused: applied, it gave a fresh budget the operator never confirmed
// (security QA: a business rejection's budget was reset).
func TestARetryNowFormDoesNotRetryAHeldInstance(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	env := f.env
	env.Process("held_scoring", map[string]any{
		"inputs": map[string]any{"fields": []any{map[string]any{"name": "crm_id", "type": "text", "required": true}}},
		"start":  "score",
		"nodes": map[string]any{
			"score": map[string]any{"kind": "pull", "definition": "score_company", "revision": 1,
				"inputs": map[string]any{"crm_id": map[string]any{"from": "input.crm_id"}, "country": map[string]any{"value": "FR"}},
				"policy": map[string]any{"max_attempts": 6}, "next": "done", "on_error": "hold"},
			"done": map[string]any{"kind": "end"},
		},
	})
	started := env.Must(201, "POST", "/api/v1/processes/held_scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": "CRM-11"}}).JSON(t)
	id, occ := started["id"].(string), started["path"].([]any)[0].(map[string]any)["occurrence_id"].(string)
	fetchOne := func() {
		t.Helper()
		relaistest.WaitFor(t, 5*time.Second, "the occurrence fetched", func() (bool, string) {
			got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.scorer, map[string]any{"worker_id": "scorer-1",
				"subscriptions": []any{map[string]any{"definition": "score_company"}}}).JSON(t)["occurrences"].([]any)
			return len(got) == 1, fmt.Sprint(got)
		})
	}
	fetchOne()
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", f.scorer, map[string]any{"worker_id": "scorer-1",
		"error_code": "SCORER_SLOW", "retryable": true, "retry_delay": "PT1S"})
	b := signedIn(t, env.URL, "en", env.Operator)
	inst := "/console/instances/" + id
	action, form := formOf(t, b.mustGet(inst+"/retry", 200), "retry-form")
	form.Set("reason", "scorer is back")
	fetchOne()
	env.Must(200, "POST", "/api/v1/pull/occurrences/"+occ+"/fail", f.scorer, map[string]any{"worker_id": "scorer-1",
		"error_code": "REJECTED", "retryable": false})
	if s := f.status(t, id); s != "held" {
		t.Fatalf("instance %s, want held", s)
	}
	r := b.do("POST", action, form)
	if r.status != http.StatusConflict || !strings.HasPrefix(text(r, "retry-error"), "This instance is held now: its occurrence failed again since this page was opened") {
		t.Errorf("a retry now posted once the instance is held: %d %q", r.status, text(r, "retry-error"))
	}
	if s, n := f.status(t, id), f.auditCount(t, id, "retry"); s != "held" || n != 0 {
		t.Errorf("after the refused form: instance %s, %d retry records; want held, none", s, n)
	}
}

// An outage's retries are brought forward in one action: the Health
// page's count lists the running instances whose retry waits, whose bulk
// retry confirms that count, grouped by the code the occurrences failed
// with, and offers each occurrence now, its attempts left unchanged (an
// on-call operator on a phone had fifty confirmations to make).
func TestBulkRetryNowBringsWaitingRetriesForward(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	env := f.env
	f.addSlowScoring(t)
	var occs []string
	for i := range 3 {
		started := env.Must(201, "POST", "/api/v1/processes/slow_scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": fmt.Sprintf("CRM-%d", i)}}).JSON(t)
		occs = append(occs, started["path"].([]any)[0].(map[string]any)["occurrence_id"].(string))
	}
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.scorer, map[string]any{"worker_id": "scorer-1", "max_tasks": 3,
		"subscriptions": []any{map[string]any{"definition": "score_company"}}}).JSON(t)["occurrences"].([]any)
	if len(got) != 3 {
		t.Fatalf("fetched %d, want 3", len(got))
	}
	for i, code := range []string{"SCORER_SLOW", "SCORER_SLOW", "SCORER_DOWN"} {
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+got[i].(map[string]any)["id"].(string)+"/fail", f.scorer, map[string]any{"worker_id": "scorer-1",
			"error_code": code, "retryable": true, "retry_delay": "PT1H"})
	}

	b := signedIn(t, env.URL, "en", env.Operator)
	list := b.mustGet("/console/instances?retrying_at=score_company", 200)
	if n := count(list, "instance-row"); n != 3 {
		t.Fatalf("%d instances listed as waiting for a retry at score_company, want 3", n)
	}
	// Each row says why it waits and until when (on-call QA: "—").
	list.doc.Find(`[data-testid=instance-row]`).Each(func(_ int, row *goquery.Selection) {
		if got := collapse(row.Find(`[data-testid=instance-row-waiting]`).Text()); !strings.HasPrefix(got, "(next attempt in ") || !strings.Contains(row.Text(), "SCORER_") {
			t.Errorf("a waiting instance's row says %q of its retry, want its code and next attempt: %q", got, collapse(row.Text()))
		}
	})
	// A screen reader jumps from the title to the filters and the results
	// (a11y QA: the page had one heading).
	if hs := list.doc.Find("h2"); hs.Length() < 2 || text(list, "results-heading") != "Instances matching the filters" {
		t.Errorf("the instances list's headings: %d h2, results %q", hs.Length(), text(list, "results-heading"))
	}
	// The menu offers what can wait a retry: not a definition only push
	// nodes call (picking it is refused), which Held at offers (QA).
	options := func(id string) []string {
		var keys []string
		list.doc.Find("#" + id + " option").Each(func(_ int, o *goquery.Selection) {
			if v, _ := o.Attr("value"); v != "" {
				keys = append(keys, v)
			}
		})
		return keys
	}
	if retrying, held := options("i-retrying-at"), options("i-held-at"); !slices.Contains(retrying, "score_company") || slices.Contains(retrying, "charge_card") ||
		!slices.Contains(held, "charge_card") {
		t.Errorf("Waiting for a retry offers %v, Held at %v: want score_company and not charge_card, Held at with it", retrying, held)
	}
	if label := collapse(list.doc.Find(`[data-testid=bulk-stop]`).Text()); label != "Stop every running instance…" {
		t.Errorf("stop offered over retrying_at as %q", label)
	}
	href, _ := list.doc.Find(`[data-testid=bulk-retry]`).Attr("href")
	confirm := b.mustGet(href, 200)
	if got, _ := confirm.doc.Find(`[data-testid=bulk-count]`).Attr("data-count"); got != "3" || text(confirm, "bulk-count") != "3 running instances are waiting for a retry." {
		t.Fatalf("bulk count %q: %q", got, text(confirm, "bulk-count"))
	}
	groups := map[string]string{}
	confirm.doc.Find(`[data-testid=bulk-group]`).Each(func(_ int, row *goquery.Selection) {
		groups[collapse(row.Find(`td`).First().Text())] = collapse(row.Find(`[data-testid=bulk-group-count]`).Text())
	})
	if groups["SCORER_SLOW"] != "2" || groups["SCORER_DOWN"] != "1" {
		t.Errorf("groups %v, want 2 SCORER_SLOW and 1 SCORER_DOWN", groups)
	}
	// Each group lists its own: the occurrences waiting after that code
	// (the instances list cannot filter running ones by it).
	confirm.doc.Find(`[data-testid=bulk-group-count]`).Each(func(_ int, a *goquery.Selection) {
		href, _ := a.Attr("href")
		want := map[string]int{"2": 2, "1": 1}[collapse(a.Text())]
		if n := count(b.mustGet(href, 200), "occurrence-row"); n != want || !strings.Contains(href, "waiting_retry=true") {
			t.Errorf("group link %s lists %d, want %d", href, n, want)
		}
		// Named with its group, not its number alone (a11y QA).
		if label, _ := a.Attr("aria-label"); !strings.HasPrefix(label, "Instances of slow_scoring with error code SCORER_") || !strings.HasSuffix(label, ": "+collapse(a.Text())) {
			t.Errorf("group link named %q", label)
		}
	})
	// An error code on that list is refused at its own field, not at an
	// empty one (a11y QA).
	refused := b.get("/console/instances?retrying_at=score_company&error_code=SCORER_SLOW")
	if _, bad := refused.doc.Find(`#i-error-code`).Attr("aria-invalid"); refused.status != http.StatusBadRequest || !bad {
		t.Errorf("error code with retrying_at: %d, error code field marked invalid %v", refused.status, bad)
	}
	if _, bad := refused.doc.Find(`#i-held-at`).Attr("aria-invalid"); bad {
		t.Error("an empty Held at field marked invalid")
	}
	// What was asked is a link away: the occurrences waiting after that
	// code (QA: the refusal named External tasks without a way there).
	if href, ok := refused.doc.Find(`[data-testid=retrying-occurrences]`).Attr("href"); !ok ||
		count(b.mustGet(href, 200), "occurrence-row") != 2 || !strings.Contains(href, "error_code=SCORER_SLOW") {
		t.Errorf("a refused error code over waiting retries links to %q, want the 2 occurrences waiting after SCORER_SLOW", href)
	}
	if count(b.get("/console/instances?retrying_at=score_company&error_code=SCORER_SLOW&held_at=score_company"), "retrying-occurrences") != 0 {
		t.Error("a page refusing held_at too links to waiting occurrences as if only the code were wrong")
	}
	// A definition only push nodes call is never retried: refused, not
	// counted 0 (verifier QA).
	if r := b.get("/console/instances/bulk?action=retry&retrying_at=charge_card"); r.status != http.StatusBadRequest ||
		!strings.Contains(r.body, "only called by push nodes") {
		t.Errorf("bulk retry over a push-only definition: %d, want 400 saying it is never retried", r.status)
	}
	if count(confirm, "bulk-left-out") != 0 {
		t.Error("a retry of running instances says held ones are left out")
	}
	fr := signedIn(t, env.URL, "fr", env.Operator).mustGet(href, 200)
	if got := text(fr, "bulk-count"); got != "3 instances en cours attendent une nouvelle tentative." {
		t.Errorf("French count %q", got)
	}
	action, form := formOf(t, confirm, "bulk-form")
	form.Set("reason", "scorer is back")
	r := b.do("POST", action, form)
	if r.status != http.StatusSeeOther {
		t.Fatalf("bulk retry now: %d %.300s", r.status, r.body)
	}
	done := b.mustGet(r.header.Get("Location"), 200)
	if !strings.Contains(done.body, "Retries brought forward for 3 instances") {
		t.Errorf("the page after a bulk retry now does not say retries were brought forward")
	}
	// Its summary says what it did and over which filter (the pin to the
	// count's moment is the console's, not a criterion shown).
	if got := text(done, "bulk-scope"); !strings.HasPrefix(got, "Bulk retry now by ") ||
		!strings.HasSuffix(got, "Filter: Waiting for a retry at a node of: score_company.") {
		t.Errorf("bulk summary %q", got)
	}
	for _, occ := range occs {
		o := env.Must(200, "GET", "/api/v1/occurrences/"+occ, env.Operator, nil).JSON(t)
		at, _ := time.Parse(time.RFC3339Nano, o["available_at"].(string))
		if o["status"] != "available" || o["attempts_left"] != 5.0 || at.After(time.Now().Add(time.Minute)) {
			t.Errorf("occurrence %s: %v available at %v, %v attempts left; want available now with its 5 left", occ, o["status"], at, o["attempts_left"])
		}
	}
	if n := count(b.mustGet("/console/instances?retrying_at=score_company", 200), "instance-row"); n != 0 {
		t.Errorf("%d still waiting for a retry after the bulk retry now", n)
	}
	// The audit log tells it from a held instance's retry (a fresh budget).
	if log := b.mustGet("/console/audit", 200); strings.Count(log.body, "retry now (attempts unchanged)") != 3 {
		t.Errorf("the audit log does not name the 3 retries brought forward as such")
	}
}

// addSlowScoring publishes slow_scoring: one score_company step that
// retries (six attempts) and fails the instance once they are spent.
func (f *fixture) addSlowScoring(t *testing.T) {
	t.Helper()
	f.env.Process("slow_scoring", map[string]any{
		"inputs": map[string]any{"fields": []any{map[string]any{"name": "crm_id", "type": "text", "required": true}}},
		"start":  "score",
		"nodes": map[string]any{
			"score": map[string]any{"kind": "pull", "definition": "score_company", "revision": 1,
				"inputs": map[string]any{"crm_id": map[string]any{"from": "input.crm_id"}, "country": map[string]any{"value": "FR"}},
				"policy": map[string]any{"max_attempts": 6}, "next": "done", "on_error": "failed"},
			"done":   map[string]any{"kind": "end"},
			"failed": map[string]any{"kind": "end", "status": "failed"},
		},
	})
}

// waitScoring starts one slow_scoring instance per delay, has the scorer
// take them all and fail each retryably with its delay (SCORER_SLOW), and
// returns their occurrences.
func (f *fixture) waitScoring(t *testing.T, delays ...string) []string {
	t.Helper()
	env := f.env
	var occs []string
	for i := range delays {
		started := env.Must(201, "POST", "/api/v1/processes/slow_scoring/instances", env.Operator, map[string]any{"inputs": map[string]any{"crm_id": fmt.Sprintf("CRM-%d", i)}}).JSON(t)
		occs = append(occs, started["path"].([]any)[0].(map[string]any)["occurrence_id"].(string))
	}
	got := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.scorer, map[string]any{"worker_id": "scorer-1", "max_tasks": len(delays),
		"subscriptions": []any{map[string]any{"definition": "score_company"}}}).JSON(t)["occurrences"].([]any)
	if len(got) != len(delays) {
		t.Fatalf("fetched %d, want %d", len(got), len(delays))
	}
	for i, o := range got {
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+o.(map[string]any)["id"].(string)+"/fail", f.scorer, map[string]any{"worker_id": "scorer-1",
			"error_code": "SCORER_SLOW", "retryable": true, "retry_delay": delays[i]})
	}
	return occs
}

// A retry that comes due between the count and its confirmation leaves
// nothing to bring forward: the console applies the action to those still
// waiting, all among the ones confirmed, and says how many came due,
// rather than ask again (an outage's backoff outruns an operator typing a
// reason).
func TestBulkRetryNowWhileRetriesComeDue(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	f.addSlowScoring(t)
	f.waitScoring(t, "PT1H", "PT1S")
	b := signedIn(t, f.env.URL, "en", f.env.Operator)
	confirm := b.mustGet("/console/instances/bulk?action=retry&retrying_at=score_company", 200)
	if got, _ := confirm.doc.Find(`[data-testid=bulk-count]`).Attr("data-count"); got != "2" {
		t.Fatalf("bulk count %q, want 2", got)
	}
	action, form := formOf(t, confirm, "bulk-form")
	form.Set("reason", "scorer is back")
	time.Sleep(1500 * time.Millisecond)
	r := b.do("POST", action, form)
	if r.status != http.StatusSeeOther {
		t.Fatalf("bulk retry now after one came due: %d %.300s", r.status, r.body)
	}
	done := b.mustGet(r.header.Get("Location"), 200)
	if !strings.Contains(done.body, "Retry brought forward for 1 instance: its workers take it now. 1 more no longer waited as counted: its retry came due, or it ended or was acted on meanwhile.") {
		t.Errorf("the page after it does not say one was brought forward and one came due: %.2000s", text(done, "flash"))
	}

	// None left: nothing is applied, and the new count is shown.
	f.waitScoring(t, "PT1S")
	confirm = b.mustGet("/console/instances/bulk?action=retry&retrying_at=score_company", 200)
	if got, _ := confirm.doc.Find(`[data-testid=bulk-count]`).Attr("data-count"); got != "1" {
		t.Fatalf("bulk count %q, want 1", got)
	}
	action, form = formOf(t, confirm, "bulk-form")
	form.Set("reason", "scorer is back")
	time.Sleep(1500 * time.Millisecond)
	// What came due is taken and fails again: it waits again, after the
	// count's moment, which the page says rather than "nothing to do"
	// alone (verifier QA).
	env := f.env
	due := env.Must(200, "POST", "/api/v1/pull/fetch-and-lock", f.scorer, map[string]any{"worker_id": "scorer-1", "max_tasks": 5,
		"subscriptions": []any{map[string]any{"definition": "score_company"}}}).JSON(t)["occurrences"].([]any)
	for _, o := range due {
		env.Must(200, "POST", "/api/v1/pull/occurrences/"+o.(map[string]any)["id"].(string)+"/fail", f.scorer, map[string]any{"worker_id": "scorer-1",
			"error_code": "SCORER_SLOW", "retryable": true, "retry_delay": "PT1H"})
	}
	r = b.do("POST", action, form)
	if r.status != http.StatusConflict || count(r, "bulk-changed") != 1 {
		t.Fatalf("bulk retry now once none waits: %d, want 409 with the count changed", r.status)
	}
	if got, want := text(r, "bulk-changed"), fmt.Sprintf("%d more wait a retry again since the count", len(due)); len(due) < 2 || !strings.Contains(got, want) {
		t.Errorf("count changed: %q; want it to say %q (%d taken again)", got, want, len(due))
	}
}
