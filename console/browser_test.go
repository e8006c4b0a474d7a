package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

// screenshotDir collects the browser test's screenshots (gitignored) so a
// person can look at both languages after a run.
const screenshotDir = "testdata/screenshots"

var installChromium sync.Once

// needChromium returns the browser's path, installing it when allowed (as
// root, on CI or with RELAIS_BROWSER_TESTS=1); otherwise it skips.
func needChromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return chromiumPath
	}
	allowed := os.Getenv("CI") == "true" || os.Getenv("RELAIS_BROWSER_TESTS") == "1"
	if !allowed || os.Geteuid() != 0 {
		t.Skipf("%s is missing; run as root with CI=true or RELAIS_BROWSER_TESTS=1 to let the test install it (apt-get install -y chromium)", chromiumPath)
	}
	installChromium.Do(func() {
		install := func() ([]byte, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "apt-get", "install", "-y", "--no-install-recommends", "chromium")
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			return cmd.CombinedOutput()
		}
		if out, err := install(); err != nil {
			t.Logf("apt-get install chromium: %v\n%s\nretrying after apt-get update", err, out)
			if out, err := exec.Command("apt-get", "update").CombinedOutput(); err != nil {
				t.Logf("apt-get update: %v\n%s", err, out)
			}
			if out, err := install(); err != nil {
				t.Logf("apt-get install chromium: %v\n%s", err, out)
			}
		}
	})
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("chromium could not be installed: %v", err)
	}
	return chromiumPath
}

// TestBrowserWalkthrough drives headless Chromium through the console in
// both languages, without JavaScript on the pages (there is none): sign in,
// filter the operations view by key and status, open an occurrence, follow
// the link to its instance. It saves a screenshot of every step.
func TestBrowserWalkthrough(t *testing.T) {
	t.Parallel()
	browserPath := needChromium(t)
	f := newFixture(t)
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, lang := range []string{"en", "fr"} {
		t.Run(lang, func(t *testing.T) {
			walkthrough(t, browserPath, f, lang)
		})
	}
}

func walkthrough(t *testing.T, browserPath string, f *fixture, lang string) {
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(browserPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelTimeout()

	words := map[string]map[string]string{
		"en": {"title": "External tasks", "failed": "failed", "instance": "Process instance", "signin": "Sign in",
			"workers": "Workers", "stream": "stream", "served": "Served by"},
		"fr": {"title": "Tâches externes", "failed": "en échec", "instance": "Instance de processus", "signin": "Se connecter",
			"workers": "Exécutants", "stream": "flux", "served": "Servie par"},
	}[lang]
	step := 0
	shot := func(name string) {
		t.Helper()
		step++
		// Quality 100 gives a PNG; anything lower, a JPEG.
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		file := filepath.Join(screenshotDir, fmt.Sprintf("%s-%02d-%s.png", lang, step, name))
		if err := os.WriteFile(file, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// click follows a link or submits a form and waits for the next page.
	click := func(what, selector string) {
		t.Helper()
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(selector), chromedp.NodeVisible)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	textOf := func(selector string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(selector), chromedp.NodeVisible))
		if err != nil {
			t.Fatalf("text of %s: %v", selector, err)
		}
		return strings.TrimSpace(s)
	}
	location := func() string {
		t.Helper()
		u, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	noLeak := func(where string) {
		t.Helper()
		html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(html, canarySecret[:6]) || strings.Contains(html, canarySensitive) {
			t.Errorf("%s: a protected value reached the browser", where)
		}
	}

	// The browser asks for English (Accept-Language en-US); French is
	// chosen with the switcher.
	do("open sign-in", chromedp.Navigate(f.env.URL+"/console/occurrences"))
	if lang == "fr" {
		click("switch to French", `[data-testid=lang-fr]`)
	}
	if got := textOf(`[data-testid=sign-in]`); got != words["signin"] {
		t.Fatalf("sign-in button = %q, want %q", got, words["signin"])
	}
	do("type the token", chromedp.SendKeys(chromedp.CSS(`#token`), f.env.Operator, chromedp.NodeVisible))
	click("sign in", `[data-testid=sign-in]`)
	if got := textOf(`[data-testid=page-title]`); got != words["title"] {
		t.Fatalf("after sign-in the title is %q, want %q (at %s)", got, words["title"], location())
	}
	shot("operations")

	do("filter", chromedp.SetValue(chromedp.CSS(`#f-definition`), "console_vault"),
		chromedp.SetValue(chromedp.CSS(`#f-status`), "failed"))
	click("apply filters", `[data-testid=apply-filters]`)
	if u := location(); !strings.Contains(u, "definition=console_vault") || !strings.Contains(u, "status=failed") {
		t.Errorf("the filters are not in the URL: %s", u)
	}
	rows, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll(`[data-testid=occurrence-row]`), chromedp.AtLeast(0)))
	if err != nil || len(rows) != 1 {
		t.Fatalf("filtered rows: %d, %v", len(rows), err)
	}
	shot("filtered")

	click("open the occurrence", `[data-testid=occurrence-link]`)
	if got := textOf(`[data-testid=status]`); got != words["failed"] {
		t.Errorf("occurrence status = %q, want %q", got, words["failed"])
	}
	noLeak("occurrence")
	shot("occurrence")

	click("follow the instance link", `[data-testid=instance-link] a`)
	if got := textOf(`[data-testid=page-title]`); !strings.HasPrefix(got, words["instance"]) || !strings.Contains(location(), f.failedInst) {
		t.Errorf("instance page: title %q at %s", got, location())
	}
	noLeak("instance")
	shot("instance")

	// The Workers page, from the navigation; a worker's definition leads
	// to its page, which says who serves it.
	click("open the workers page", `[data-testid=nav-workers]`)
	if got := textOf(`[data-testid=page-title]`); got != words["workers"] {
		t.Errorf("workers page title %q, want %q", got, words["workers"])
	}
	if got := textOf(`[data-testid=worker-row][data-worker=stream-7] [data-testid=worker-protocol]`); got != words["stream"] {
		t.Errorf("stream-7's protocol reads %q, want %q", got, words["stream"])
	}
	noLeak("workers")
	shot("workers")
	click("open a served definition", `[data-testid=worker-row][data-worker=stream-7] [data-testid=worker-definitions] a`)
	if got := textOf(`[data-testid=served-by]`); !strings.HasPrefix(got, words["served"]) {
		t.Errorf("the definition page says %q, want it to start %q", got, words["served"])
	}
	shot("definition-served")

	// A phone: the page must not scroll sideways; wide tables scroll
	// inside their own box.
	do("phone viewport", chromedp.EmulateViewport(390, 844), chromedp.Navigate(f.env.URL+"/console/occurrences/"+f.completed))
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - document.documentElement.clientWidth`))
	if err != nil {
		t.Fatal(err)
	}
	if width > 0 {
		t.Errorf("on a phone the page is %dpx wider than the screen", width)
	}
	shot("phone-occurrence")
}
