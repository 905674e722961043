package browser_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// A job's page shows its tags, each a link to the list of the caller's
// jobs with that tag; that list's "Cancel them all" asks first, names the
// tag, and cancels the tagged jobs only.
func TestDashboardListsAndCancelsJobsByTag(t *testing.T) {
	const caller = "browser-tags"
	ctx, base := browser(t, caller)
	// Delayed jobs stay queued for the whole test.
	enq := func(tags string) jobs.View {
		t.Helper()
		body := `{"kind":"example.hash","payload":{"text":"t","rounds":1},"delay":600`
		if tags != "" {
			body += `,"tags":` + tags
		}
		a := call(t, "POST", "/v1/jobs", caller, "application/json", body+`}`)
		var v jobs.View
		if err := json.Unmarshal([]byte(a.body), &v); a.status != http.StatusAccepted || err != nil {
			t.Fatalf("enqueue: %d %s", a.status, a.body)
		}
		t.Cleanup(func() { call(t, "POST", "/v1/jobs/"+v.ID+"/cancel", caller, "", "") })
		return v
	}
	var tagged []jobs.View
	for range 3 {
		tagged = append(tagged, enq(`{"import":"42","customer":"acme"}`))
	}
	others := []jobs.View{enq(`{"import":"43"}`), enq("")}

	// The job's page links its tag to the filtered list.
	tag := chromedp.CSS(`#tags a[href="/jobs?tag=import%3d42"]`)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs/"+tagged[0].ID), chromedp.WaitVisible(tag)); err != nil {
		t.Fatalf("the tagged job's page: %v", err)
	}
	if text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#tags`))); err != nil || !strings.Contains(text, "customer=acme") || !strings.Contains(text, "import=42") {
		t.Fatalf("the job's page shows tags %q (%v)", text, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(tag), chromedp.WaitVisible(chromedp.CSS(`#jobs`))); err != nil {
		t.Fatalf("follow the tag: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#jobs tbody`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range tagged {
		if !strings.Contains(rows, v.ID) {
			t.Errorf("the list by tag lacks %s: %q", v.ID, rows)
		}
	}
	for _, v := range others {
		if strings.Contains(rows, v.ID) {
			t.Errorf("the list by tag shows %s, which has not the tag", v.ID)
		}
	}

	// Cancel them all: one question, naming the tag, then only the tagged.
	asked := make(chan string, 1)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			asked <- ev.Message
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`form[action="/bulk/cancel"] button`)), chromedp.WaitVisible(chromedp.CSS(`.flash`))); err != nil {
		t.Fatalf("cancel them all: %v", err)
	}
	if q := <-asked; !strings.Contains(q, "tagged import=42") {
		t.Fatalf("the question was %q, want it to name the tag", q)
	}
	if flash, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.flash`))); err != nil || !strings.HasPrefix(flash, "3 jobs matched, 3 cancelled") {
		t.Fatalf("after cancelling by tag the page says %q (%v)", flash, err)
	}
	for _, v := range tagged {
		if _, got := get(t, caller, v.ID); got.Status != jobs.StatusCancelled {
			t.Errorf("tagged job %s is %s after the bulk cancel", v.ID, got.Status)
		}
	}
	for _, v := range others {
		if _, got := get(t, caller, v.ID); got.Status != jobs.StatusQueued {
			t.Errorf("job %s without the tag is %s after the bulk cancel", v.ID, got.Status)
		}
	}
}
