package browser_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// A caller pauses its jobs of a kind from the overview's Pause button:
// the button asks first, and a dismissed question pauses nothing. The
// pause is listed on the Pauses page, a job of the kind enqueued then
// shows on its page that a pause holds it, and the pause's Resume button
// ends it.
func TestDashboardPausesAndResumesAKind(t *testing.T) {
	const caller, kind = "browser-pause", "example.hash"
	ctx := chromium(t)
	t.Cleanup(func() { call(t, "POST", "/v1/pauses/resume", caller, "application/json", `{"kind":"`+kind+`"}`) })
	// The dashboard counts the pauses posted to it.
	var posted atomic.Int64
	base := serveDashboard(t, caller, nil, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/pauses" {
				posted.Add(1)
			}
			h.ServeHTTP(w, r)
		})
	}).URL

	// Each confirmation is answered by the next decision, and its
	// question reported.
	decisions, asked := make(chan bool, 2), make(chan string, 2)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			accept := <-decisions
			asked <- ev.Message
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: accept})
		}
	}()
	question := func() string {
		t.Helper()
		select {
		case q := <-asked:
			return q
		case <-ctx.Done():
			t.Fatal("the Pause button asked nothing")
		}
		return ""
	}
	pause := chromedp.CSS(`button[aria-label="Pause kind ` + kind + `"]`)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(pause)); err != nil {
		t.Fatalf("the overview: %v", err)
	}
	decisions <- false
	if err := chromedp.Do(ctx, chromedp.Click(pause)); err != nil {
		t.Fatalf("the Pause button: %v", err)
	}
	if q := question(); !strings.HasPrefix(q, "Pause your jobs of kind "+kind+"?") {
		t.Fatalf("the Pause button asked %q", q)
	}
	decisions <- true
	if err := chromedp.Do(ctx, chromedp.Click(pause), chromedp.WaitVisible(chromedp.CSS(`.flash`))); err != nil {
		t.Fatalf("pause from the overview: %v", err)
	}
	question()
	if n := posted.Load(); n != 1 {
		t.Fatalf("%d pauses were posted for a dismissed and an accepted question, want 1", n)
	}
	row := chromedp.CSS(`#pauses tr[data-pause^="kind:` + kind + `:owner:"]`)
	listed, err := chromedp.Run(ctx, chromedp.Text(row))
	if err != nil || !strings.Contains(listed, "your jobs of "+kind) || !strings.Contains(listed, "owner") {
		t.Fatalf("the Pauses page lists %q (%v), want the caller's pause of %s", listed, err, kind)
	}

	// A job enqueued now waits on the pause. Its delay outlasts every
	// instance's copy of the pause set (5 s), so no worker starts it.
	a := call(t, "POST", "/v1/jobs", caller, "application/json", `{"kind":"`+kind+`","payload":{"text":"held","rounds":1},"delay":10}`)
	var v jobs.View
	if err := json.Unmarshal([]byte(a.body), &v); a.status != http.StatusAccepted || err != nil {
		t.Fatalf("enqueue: %d %s", a.status, a.body)
	}
	t.Cleanup(func() { call(t, "POST", "/v1/jobs/"+v.ID+"/cancel", caller, "", "") })
	waitingOn(t, caller, v.ID, "paused")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs/"+v.ID), chromedp.WaitVisible(chromedp.CSS(`#waiting`))); err != nil {
		t.Fatalf("the held job's page: %v", err)
	}
	if waiting, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#waiting`))); err != nil || !strings.HasPrefix(waiting, "paused: a pause holds it") {
		t.Fatalf("the held job's page says it waits on %q (%v)", waiting, err)
	}

	// The Resume button ends the pause, at once and without a question.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/pauses"), chromedp.Click(chromedp.CSS(`#pauses tr[data-pause^="kind:`+kind+`:owner:"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`))); err != nil {
		t.Fatalf("resume from the Pauses page: %v", err)
	}
	if flash, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.flash`))); err != nil || !strings.HasPrefix(flash, "Resumed") {
		t.Fatalf("after the Resume button the page says %q (%v)", flash, err)
	}
	if body, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#pauses tbody`))); err != nil || strings.Contains(body, "kind:"+kind) {
		t.Fatalf("after the resume the Pauses page lists %q (%v)", body, err)
	}
	if a := call(t, "GET", "/v1/pauses", caller, "", ""); a.status != http.StatusOK || strings.Contains(a.body, kind) {
		t.Fatalf("after the resume GET /v1/pauses: %d %s", a.status, a.body)
	}
	waitingOn(t, caller, v.ID, "")
}

// waitingOn polls the job until it is queued and waiting on want, or for
// want "" until it waits on nothing (queued, or started since): each API
// instance reads the pause set again within 5 s.
func waitingOn(t *testing.T, caller, id, want string) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		a, v := get(t, caller, id)
		if a.status == http.StatusOK && v.WaitingOn == want && (want == "" || v.Status == jobs.StatusQueued) {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("job %s does not wait on %q after 20 s: %s", id, want, a.body)
		}
	}
}
