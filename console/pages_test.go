package console_test

import (
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/PuerkitoBio/goquery"
)

// expect is what one page must show in one language.
type expect struct {
	status int
	// testid → substring its text must contain, per language.
	texts map[string][2]string
	// testid → how many elements it selects (at least).
	atLeast map[string]int
}

func (f *fixture) expectations() map[string]expect {
	return map[string]expect{
		"occurrences": {status: 200,
			texts: map[string][2]string{
				"page-title":        {"External tasks", "Tâches externes"},
				"counts-scope":      {"All definitions", "Toutes les définitions"},
				"count-available":   {"available 2", "disponible 2"},
				"count-completed":   {"completed 1", "terminée 1"},
				"count-failed":      {"failed 5", "en échec 5"},
				"counts-total":      {"8 occurrences", "8 occurrences"},
				"counts-as-of":      {"as of ", "au "},
				"nav-occurrences":   {"External tasks", "Tâches externes"},
				"signed-in-as":      {"Signed in as operator (operator)", "Connecté en tant qu’operator (opérateur)"},
				"filter-status":     {"All statuses", "Tous les statuts"},
				"filter-consumer":   {"vault-sync", "vault-sync"},
				"filter-definition": {"console_vault", "console_vault"},
				// Its hidden lead, read first by a screen reader, with
				// each language's colon.
				"prefs-link": {"Display settings: Times in", "Réglages d’affichage\u202f: "},
			},
			atLeast: map[string]int{"occurrence-row": 4, "occurrence-link": 4}},
		"occurrences-more-filters": {status: 400,
			texts: map[string][2]string{"filter-errors": {"The process instance must be a whole instance id (a UUID): the lists show the end of each id; open the instance, or copy its link, for the whole id.",
				"L’instance de processus doit être un identifiant d’instance complet (un UUID)\u202f: les listes montrent la fin de chaque identifiant\u202f; ouvrez l’instance, ou copiez son lien, pour l’identifiant complet."}}},
		"occurrences-filtered": {status: 200,
			texts: map[string][2]string{
				"counts-scope":      {"Totals of definition console_vault, not narrowed by the other filters", "Totaux de la définition console_vault, sans les autres filtres"},
				"count-completed":   {"completed 1", "terminée 1"},
				"count-available":   {"available 1", "disponible 1"},
				"counts-total":      {"3 occurrences", "3 occurrences"},
				"occurrence-status": {"failed", "en échec"},
				"occurrence-row":    {"2 attempts", "2 tentatives"},
				"filter-definition": {"console_vault", "console_vault"},
			},
			atLeast: map[string]int{"occurrence-row": 1}},
		"occurrence-completed": {status: 200,
			texts: map[string][2]string{
				"status":           {"completed", "terminée"},
				"attempts-summary": {"1 attempt · at most 3", "1 tentative · au plus 3"},
				"definition-link":  {"console_vault, revision 1", "console_vault, révision 1"},
				"route":            {"ok", "ok"},
				"policy":           {"1 min 30 s", "1 min 30 s"},
				"attempt-outcome":  {"completed", "terminée"},
				"inputs":           {"Acme SA", "Acme SA"},
				"outputs":          {"REF-42", "REF-42"},
				"masked":           {"••• hidden (secret)", "••• masqué (secret)"},
			},
			atLeast: map[string]int{"masked": 4, "attempt-row": 1, "value-row": 10}},
		"occurrence-failed": {status: 200,
			texts: map[string][2]string{
				"status":                {"failed", "en échec"},
				"attempts-summary":      {"2 attempts · at most 3", "2 tentatives · au plus 3"},
				"error-code":            {"KEY_REFUSED", "KEY_REFUSED"},
				"attempt-error-message": {"HTTP 503: [redacted] / [redacted]", "HTTP 503: [masqué] / [masqué]"},
				"attempt-outcome":       {"failed", "en échec"},
				"dates":                 {"UTC", "UTC"},
			},
			atLeast: map[string]int{"attempt-row": 2, "masked": 2}},
		"occurrence-available": {status: 200,
			texts: map[string][2]string{
				"status":           {"available", "disponible"},
				"attempts-summary": {"0 attempts", "0 tentative"},
				"policy":           {"1 day", "1 jour"},
				"outputs":          {"No outputs yet", "Pas encore de sorties"},
			}},
		"instance-completed": {status: 200,
			texts: map[string][2]string{
				"instance-status": {"completed", "terminée"},
				"process-version": {"vault_flow, version 1", "vault_flow, version 1"},
				"end-node":        {"end_ok", "end_ok"},
				"path-status":     {"completed", "terminée"},
				"instance-inputs": {"Acme SA", "Acme SA"},
				"masked":          {"••• hidden (secret)", "••• masqué (secret)"},
			},
			atLeast: map[string]int{"path-step": 1, "path-occurrence": 1}},
		"instance-failed": {status: 200,
			texts: map[string][2]string{
				"instance-status": {"failed", "en échec"},
				"end-node":        {"end_error", "end_error"},
			},
			atLeast: map[string]int{"path-step": 1}},
		"instance-running": {status: 200,
			texts: map[string][2]string{
				"instance-status": {"running", "en cours"},
				"stop-instance":   {"Stop this instance", "Arrêter cette instance"},
			}},
		"instance-stop": {status: 200,
			texts: map[string][2]string{
				"stop-question": {"Stop this instance? Its open occurrences are cancelled.", "Arrêter cette instance\u202f? Ses occurrences ouvertes sont annulées."},
				"confirm-stop":  {"Stop the instance", "Arrêter l’instance"},
			}},
		"definitions": {status: 200,
			texts: map[string][2]string{
				"page-title": {"Definitions", "Définitions"},
				"releases":   {"1 release (2026.11)", "1 publication (2026.11)"},
			},
			atLeast: map[string]int{"definition-row": 2}},
		"definition": {status: 200,
			texts: map[string][2]string{
				"page-title":     {"Definition console_vault", "Définition console_vault"},
				"working-name":   {"Vault check", "Vault check"},
				"diff-summary":   {"From revision 1 to revision 2: 2 changes, 2 breaking", "De la révision 1 à la révision 2\u202f: 2 changements, 2 incompatibles"},
				"classification": {"secret", "secrète"},
				"changes":        {"maximum length: 100 → 80", "longueur maximale\u202f: 100 → 80"},
				"revision-2":     {"at most 80 characters", "au plus 80 caractères"},
				"served-by":      {"Served by", "Servie par"},
			},
			atLeast: map[string]int{"revision-1": 1, "revision-2": 1, "change-row": 2, "breaks-processes": 2}},
		"definition-unserved": {status: 200,
			texts: map[string][2]string{
				"served-by": {"No worker serves this definition", "Aucun exécutant ne sert cette définition"},
			}},
		// Only push nodes use it: no worker is needed, so no warning.
		"definition-push-only": {status: 200,
			texts: map[string][2]string{
				"served-by": {"No process pulls this definition: Relais calls its destinations (push), and it needs no worker.", "Aucun processus n’utilise cette définition en mode pull\u202f: Relais appelle ses destinations (push), elle n’a besoin d’aucun exécutant."},
			}},
		"definition-unused": {status: 200,
			texts: map[string][2]string{
				"served-by": {"No process uses this definition yet: it needs a worker once a process pulls it.", "Aucun processus n’utilise encore cette définition : elle aura besoin d’un exécutant quand un processus l’utilisera en mode pull."},
			}},
		"workers": {status: 200,
			texts: map[string][2]string{
				"page-title":         {"Workers", "Exécutants"},
				"nav-workers":        {"Workers", "Exécutants"},
				"worker-id":          {"stream-7", "stream-7"},
				"worker-protocol":    {"stream", "flux"},
				"worker-definitions": {"console_vault", "console_vault"},
			},
			atLeast: map[string]int{"worker-row": 1}},
		"workers-of-definition": {status: 200,
			texts: map[string][2]string{
				"workers-scope": {"Workers serving console_vault", "Exécutants servant console_vault"},
				"worker-id":     {"stream-7", "stream-7"},
			},
			atLeast: map[string]int{"worker-row": 1}},
		"not-found": {status: 404,
			texts: map[string][2]string{"page-title": {"Not found", "Introuvable"}, "nav-occurrences": {"External tasks", "Tâches externes"}}},

		"health": {status: 200,
			texts: map[string][2]string{
				"page-title":   {"Health", "État"},
				"chart-scope":  {"All definitions", "Toutes les définitions"},
				"health-as-of": {"As of ", "Au "},
			},
			atLeast: map[string]int{"health-row": 4, "chart": 1}},
		"health-scoped": {status: 200,
			texts: map[string][2]string{"chart-scope": {"Definition charge_card", "Définition charge_card"}}},
		"occurrences-triage": {status: 200,
			texts: map[string][2]string{
				"counts-scope":            {"Totals of all definitions, not narrowed by the other filters", "Totaux de toutes les définitions, sans les autres filtres"},
				"occurrence-error":        {"destination_http_503", "destination_http_503"},
				"occurrence-business-key": {"order-100", "order-100"},
				"page-range":              {"Rows 1–3", "Lignes 1 à 3"},
			},
			atLeast: map[string]int{"occurrence-row": 3}},
		"occurrence-push-held": {status: 200,
			texts: map[string][2]string{
				"status":       {"failed", "en échec"},
				"error-code":   {"destination_http_503 — The destination answered HTTP 503.", "destination_http_503 — La destination a répondu HTTP 503."},
				"attempt-http": {"HTTP 503", "HTTP 503"},
				"state-note":   {"Its instance is held here, waiting for an operator.", "Son instance est bloquée ici, en attente d’un opérateur."},
				"summary":      {"Last error (attempt 1)", "Dernière erreur (tentative 1)"},
				"business-key": {"order-1001", "order-1001"},
				// A push call is never retried: no retry delay between
				// its "none" and its deadline.
				"policy": {"Retriesnone: a failed call takes the node’s error path Deadlinenone Priority5 (0 lowest, 9 highest) Destinationpayments Call timeout5 seconds",
					"Nouvelles tentativesaucune\u202f: un appel en échec suit le chemin d’erreur du nœud Échéanceaucune Priorité5 (0 la plus basse, 9 la plus haute) Destinationpayments Délai d’appel5 secondes"},
			},
			atLeast: map[string]int{"http-note": 1, "instance-actions-link": 1}},
		"occurrence-pull-held": {status: 200,
			texts: map[string][2]string{
				"error-code":    {"SCORER_DOWN", "SCORER_DOWN"},
				"error-message": {"the scoring model is being redeployed", "the scoring model is being redeployed"},
				"summary":       {"Message from the worker (its own words, protected values masked)", "Message de l’exécutant (ses propres termes, valeurs protégées masquées)"},
				"state-text":    {"Failed (", "En échec ("},
			}},
		"instances": {status: 200,
			texts:   map[string][2]string{"page-title": {"Process instances", "Instances de processus"}},
			atLeast: map[string]int{"instance-row": 8}},
		"instances-held": {status: 200,
			texts:   map[string][2]string{"bulk-retry": {"Retry every held instance…", "Reprendre toutes les instances bloquées…"}},
			atLeast: map[string]int{"instance-row": 2}},
		"instance-held": {status: 200,
			texts: map[string][2]string{
				"instance-status":  {"held", "bloquée"},
				"held-node":        {"score", "score"},
				"retry-instance":   {"Retry…", "Reprendre…"},
				"abandon-instance": {"Abandon…", "Abandonner…"},
				"business-key":     {"lead-7", "lead-7"},
			}},
		"instance-stopped": {status: 200,
			texts: map[string][2]string{
				"instance-status": {"cancelled", "annulée"},
				"attribution":     {"Stopped by ops-alice at ", "Arrêtée par ops-alice le "},
				"audit-reason":    {"duplicate order (OPS-1234)", "duplicate order (OPS-1234)"},
			}},
		"instance-retry": {status: 200,
			texts: map[string][2]string{"retry-question": {"Retry this instance? Its failed occurrence at node score is offered again",
				"Reprendre cette instance\u202f? Son occurrence en échec au nœud score est proposée de nouveau"}}},
		"instance-abandon": {status: 200,
			texts: map[string][2]string{"abandon-question": {"Abandon this instance? It fails with the error code abandoned.",
				"Abandonner cette instance\u202f? Elle passe en échec avec le code d’erreur abandoned."}}},
		"bulk-retry": {status: 200,
			texts: map[string][2]string{"bulk-count": {"2 held instances match now.", "2 instances bloquées correspondent au filtre maintenant."},
				"bulk-submit": {"Retry 2 instances", "Reprendre 2 instances"}}},
		"audit": {status: 200,
			texts:   map[string][2]string{"audit-who": {"ops-alice", "ops-alice"}, "audit-action": {"stop", "arrêt"}},
			atLeast: map[string]int{"audit-row": 1}},
		"processes": {status: 200,
			atLeast: map[string]int{"process-row": 4}},
		"process-version": {status: 200,
			texts: map[string][2]string{
				"page-title":        {"Process checkout, version 1", "Processus checkout, version 1"},
				"node-on-error":     {"destination_http_503 → hold (an incident for an operator)", "destination_http_503 → blocage (un incident pour un opérateur)"},
				"node-counts":       {"failed 3", "en échec 3"},
				"node-counts-as-of": {"Counts as of ", "Décomptes au "},
			},
			atLeast: map[string]int{"graph-node": 4, "node-row": 3, "process-instances": 1}},
		"search-nothing": {status: 404,
			texts: map[string][2]string{"search-message": {"No instance has “no-such-key” as its business key. A business key is found only whole", "Aucune instance n’a «\u202fno-such-key\u202f» pour clé métier. Une clé métier n’est trouvée qu’entière"}}},
		"preferences": {status: 200,
			texts: map[string][2]string{"save-prefs": {"Save settings", "Enregistrer les réglages"}}},
	}
}

// TestEveryPageInBothLanguages renders each page with data in English
// (Accept-Language) and French (the switcher's cookie) and checks its key
// elements.
func TestEveryPageInBothLanguages(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	want := f.expectations()
	for i, lang := range []string{"en", "fr"} {
		b := signedIn(t, f.env.URL, lang, f.env.Operator)
		for _, p := range f.allPages() {
			exp, ok := want[p.name]
			if !ok {
				t.Fatalf("no expectations for page %s", p.name)
			}
			r := b.mustGet(p.path, exp.status)
			if got, _ := r.doc.Find("html").Attr("lang"); got != lang {
				t.Errorf("%s %s: <html lang=%q>", lang, p.name, got)
			}
			if text(r, "page-title") == "" {
				t.Errorf("%s %s: no page title", lang, p.name)
			}
			if icon, _ := r.doc.Find(`link[rel=icon]`).Attr("href"); icon != "/console/static/icon.svg" {
				t.Errorf("%s %s: icon %q, want the console's own (else browsers ask /favicon.ico, a 404)", lang, p.name, icon)
			}
			for id, texts := range exp.texts {
				if got := text(r, id); !strings.Contains(got, texts[i]) {
					t.Errorf("%s %s: [data-testid=%s] = %q, want it to contain %q", lang, p.name, id, got, texts[i])
				}
			}
			for id, n := range exp.atLeast {
				if got := count(r, id); got < n {
					t.Errorf("%s %s: %d [data-testid=%s], want at least %d", lang, p.name, got, id, n)
				}
			}
		}
		if icon := b.mustGet("/console/static/icon.svg", 200); icon.header.Get("Content-Type") != "image/svg+xml" {
			t.Errorf("the icon is served as %q", icon.header.Get("Content-Type"))
		}
		signIn := newBrowser(t, f.env.URL, lang).mustGet("/console/sign-in", 200)
		if got, want := text(signIn, "sign-in"), []string{"Sign in", "Se connecter"}[i]; got != want {
			t.Errorf("%s sign-in button = %q, want %q", lang, got, want)
		}
	}
}

// Words of one language's interface that must never appear in pages of the
// other: the catalog silently falls back to English, so a missing
// translation shows up here.
var (
	englishWords = []string{"Attempts", "attempts", "attempt", "Definitions", "External tasks", "Sign out", "Sign in", "Status",
		"Created", "Settled", "Inputs", "Outputs", "hidden", "Next page", "Filters", "Apply filters", "Counts by status",
		"Process instance", "Working copy", "Revisions", "Releases", "release", "Compare", "Breaks processes", "Summary", "Policy",
		"Retry delay", "Worker id", "Outcome", "Error message", "completed", "failed", "available", "cancelled", "reserved",
		"running", "yes", "hours", "day", "minutes", "seconds", "Field", "Value", "Required", "Constraints", "Token",
		"Language", "Stop", "Keep it running", "Path", "Node", "Not found", "Signed in", "items", "at most", "Jan", "Feb",
		"Dec", "Nov", "Oct", "Sep", "Aug", "Jul", "Jun", "Apr", "Mar", "revision", "Revision", "Definition", "Workers", "Last seen",
		"In flight", "long polling", "Consumers", "Grants"}
	frenchWords = []string{"Tentatives", "tentative", "tentatives", "Définitions", "Tâches externes", "Se déconnecter", "Statut",
		"Entrées", "Sorties", "masqué", "Page suivante", "Filtres", "Révision", "révision", "Publications", "publication",
		"Résumé", "Politique", "terminée", "disponible", "annulée", "en échec", "oui", "non", "heures", "jour",
		"secondes", "Champ", "Valeur", "Obligatoire", "Jeton", "Langue", "Arrêter", "Parcours", "Nœud", "Introuvable",
		"Connecté", "éléments", "au plus", "nov.", "déc.", "Définition", "Créée", "secrète", "sensible", "Exécutants", "Dernier signe de vie",
		"interrogation longue", "Consommateurs"}
)

// TestNoOtherLanguageWords fails when a French page shows English interface
// words, or an English page French ones.
func TestNoOtherLanguageWords(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	for _, tc := range []struct {
		lang      string
		forbidden []string
	}{{"fr", englishWords}, {"en", frenchWords}} {
		b := signedIn(t, f.env.URL, tc.lang, f.env.Operator)
		pages := append(f.allPages(), page{"sign-in", "/console/sign-in"})
		for _, p := range pages {
			client := b
			if p.name == "sign-in" {
				client = newBrowser(t, f.env.URL, tc.lang)
			}
			r := client.get(p.path)
			checkNoWords(t, tc.lang+" page "+p.name, r.doc, tc.forbidden)
		}
	}
}

// checkNoWords fails when what a reader of doc sees holds one of words
// (another language's interface words).
func checkNoWords(t *testing.T, name string, doc *goquery.Document, words []string) {
	t.Helper()
	shown := visibleText(doc)
	for _, w := range words {
		if containsWord(shown, w) {
			t.Errorf("%s contains %q: %s", name, w, around(shown, w))
		}
	}
}

// visibleText is what a reader sees or hears: text nodes, the title, and
// the attributes browsers show (placeholders, labels, titles).
func visibleText(doc *goquery.Document) string {
	var b strings.Builder
	doc.Find("body").Each(func(_ int, s *goquery.Selection) { b.WriteString(s.Text()) })
	b.WriteString(" " + doc.Find("title").Text())
	doc.Find("[placeholder],[aria-label],[title]").Each(func(_ int, s *goquery.Selection) {
		for _, a := range []string{"placeholder", "aria-label", "title"} {
			if v, ok := s.Attr(a); ok {
				b.WriteString(" " + v)
			}
		}
	})
	return b.String()
}

// containsWord reports whether w occurs in s between non-letters.
func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		before, after := ' ', ' '
		if start > 0 {
			before = []rune(s[:start])[len([]rune(s[:start]))-1]
		}
		if end < len(s) {
			after = []rune(s[end:])[0]
		}
		if !unicode.IsLetter(before) && !unicode.IsLetter(after) {
			return true
		}
		i = start + 1
	}
}

var spaces = regexp.MustCompile(`\s+`)

func around(s, w string) string {
	i := strings.Index(s, w)
	lo, hi := max(0, i-40), min(len(s), i+len(w)+40)
	return spaces.ReplaceAllString(s[lo:hi], " ")
}

// TestProtectedValuesNeverRendered renders every page, as an operator and
// as an administrator and in both languages, and fails if a secret or
// sensitive canary, or any prefix of six characters or more of the secret,
// appears anywhere in the HTML.
func TestProtectedValuesNeverRendered(t *testing.T) {
	t.Parallel()
	f := newIncidentFixture(t)
	var leaks []string
	for n := 6; n <= len(canarySecret); n++ {
		leaks = append(leaks, canarySecret[:n])
	}
	leaks = append(leaks, canarySensitive, "SENSITIVE-91wx", "SECRET-7q3z", "7q3z", "91wx")
	masked := 0
	for _, token := range []string{f.env.Operator, f.env.Admin} {
		for _, lang := range []string{"en", "fr"} {
			b := signedIn(t, f.env.URL, lang, token)
			paths := []string{"/console/sign-in", "/console/occurrences?limit=1", "/console/occurrences?status=failed&definition=console_vault"}
			for _, p := range f.allPages() {
				paths = append(paths, p.path)
			}
			for _, p := range paths {
				r := b.get(p)
				for _, leak := range leaks {
					if strings.Contains(r.body, leak) {
						t.Errorf("%s %s: the page contains %q", lang, p, leak)
					}
				}
				if r.doc != nil {
					masked += count(r, "masked")
				}
			}
		}
	}
	if masked == 0 {
		t.Fatal("no masked marker rendered: the pages did not show the protected fields at all")
	}
}
