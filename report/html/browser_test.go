package html

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestBrowser loads the pages in a headless Chromium: no console message, no request but the page's
// own, and every chart has drawn marks (elements with a non-empty box). With $MOCKER_HTML_SHOTS set to
// a directory, it leaves each page and a full-page screenshot there, to look at.
func TestBrowser(t *testing.T) {
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Skip("no chromium on PATH (Debian: apt-get install chromium): the HTML pages are not checked in a browser")
	}

	pages := map[string][]byte{}
	pages["agg"] = render(t, simulate(t, false))
	pages["disagg"] = render(t, simulate(t, true))
	var b bytes.Buffer
	if err := WriteFrontier(&b, sampleFrontier()); err != nil {
		t.Fatal(err)
	}
	pages["frontier"] = b.Bytes()
	wantCharts := map[string]int{"agg": 9, "disagg": 11, "frontier": 1}

	var mu sync.Mutex
	var problems []string // console messages, exceptions, unexpected requests
	note := func(s string) {
		mu.Lock()
		problems = append(problems, s)
		mu.Unlock()
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, ok := pages[strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/"), ".html")]
		if !ok {
			note("request for " + r.URL.Path)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx, cancel = chromedp.NewExecAllocator(ctx, chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.NoFirstRun, chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(t.TempDir()))
	defer cancel()
	ctx, cancel = chromedp.NewContext(ctx)
	defer cancel()
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			msg := "console." + string(ev.Type) + ":"
			for _, a := range ev.Args {
				msg += " " + string(a.Value) + a.Description
			}
			note(msg)
		case *runtime.EventExceptionThrown:
			note("exception: " + ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			note("log " + string(ev.Entry.Level) + ": " + ev.Entry.Text)
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(ev.Request.URL, srv.URL+"/") {
				note("request for " + ev.Request.URL)
			}
		}
	})
	if err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	shots := os.Getenv("MOCKER_HTML_SHOTS")
	for _, name := range []string{"agg", "disagg", "frontier"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"+name+".html")); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		type drawn struct {
			Title string  `json:"title"`
			Marks int     `json:"marks"`
			Width float64 `json:"width"`
		}
		charts, err := chromedp.Run(ctx, chromedp.Evaluate[[]drawn](`Array.from(document.querySelectorAll("svg.chart")).map(s => ({
			title: s.querySelector("title").textContent,
			marks: Array.from(s.querySelectorAll(".mark")).filter(m => { const b = m.getBBox(); return b.width > 0 || b.height > 0 }).length,
			width: s.getBoundingClientRect().width,
		}))`))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(charts) != wantCharts[name] {
			t.Errorf("%s: %d charts, want %d", name, len(charts), wantCharts[name])
		}
		for _, c := range charts {
			if c.Marks == 0 || c.Width < 300 {
				t.Errorf("%s: chart %q: %d drawn marks, %.0f px wide; want marks, at least 300 px", name, c.Title, c.Marks, c.Width)
			}
		}
		t.Logf("%s: %d charts, %d bytes", name, len(charts), len(pages[name]))
		if shots != "" {
			png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatalf("%s: screenshot: %v", name, err)
			}
			for file, data := range map[string][]byte{name + ".png": png, name + ".html": pages[name]} {
				if err := os.WriteFile(filepath.Join(shots, file), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}
