package browser_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/lambdajobs/lambdajobs/internal/dev/dashboard"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/eventbus"
)

// browser starts headless Chromium (Debian's chromium, which make test
// installs when missing) on a dashboard over the local stack, as caller.
func browser(t *testing.T, caller string) (context.Context, string) {
	t.Helper()
	ctx := chromium(t)
	return ctx, serveDashboard(t, caller, nil, nil).URL
}

// chromium starts headless Chromium for one test.
func chromium(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is required for the dashboard's browser tests (make test installs it: apt-get install chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1366, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// serveDashboard serves a dashboard over the local stack as caller on a
// loopback test server, answering at its listener's address; change, when
// set, edits the configuration first, and wrap, when set, wraps the
// dashboard's handler.
func serveDashboard(t *testing.T, caller string, change func(*dashboard.Config), wrap func(http.Handler) http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	cfg, err := stack.DashboardConfig(caller, srv.Listener.Addr().String())
	if err == nil && change != nil {
		change(&cfg)
	}
	var dash http.Handler
	if err == nil {
		dash, err = dashboard.New(cfg)
	}
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	if wrap != nil {
		dash = wrap(dash)
	}
	srv.Config.Handler = dash
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// screenshot writes docs/<name>.png when UPDATE_SCREENSHOTS is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	if os.Getenv("UPDATE_SCREENSHOTS") == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	root, _ := localaws.FindRoot()
	if err := os.WriteFile(filepath.Join(root, "docs", "guide", name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A sleeping job appears in the list, its page shows its progress moving,
// and the cancel button cancels it.
func TestDashboardFollowsAndCancelsAJob(t *testing.T) {
	ctx, base := browser(t, "browser")
	// The job's handler time is the test stack's (a few seconds): hold it
	// queued until its page is open, so a loaded machine's page loads do
	// not spend it before the cancel button is pressed.
	stack.Pause()
	defer stack.Unpause()
	v := enqueue(t, "browser", "example.sleep", `{"ms":60000,"steps":240}`)
	link := chromedp.CSS(`a[href="/jobs/` + v.ID + `"]`)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(link)); err != nil {
		t.Fatalf("the job list: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#jobs tbody`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rows, v.ID) || !strings.Contains(rows, "example.sleep") {
		t.Fatalf("the list shows %q", rows)
	}
	// The detail page, live: the job starts, and the partial result moves.
	if err := chromedp.Do(ctx, chromedp.Click(link), chromedp.WaitVisible(chromedp.CSS(`#job`))); err != nil {
		t.Fatalf("the job's page: %v", err)
	}
	stack.Unpause()
	if err := chromedp.Do(ctx,
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](`document.getElementById("result").textContent.includes('"done"')`, chromedp.WithPollingTimeout(20*time.Second))(ctx, tg)
			return err
		}),
	); err != nil {
		t.Fatalf("the job's page: %v", err)
	}
	first, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#result`)))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`pre[aria-labelledby="payload-h"]`)))
	if err != nil || !strings.Contains(payload, `"steps": 240`) {
		t.Fatalf("the job's payload: %q %v", payload, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById("result").textContent !== %s`, jsString(first)), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the progress did not move from %q: %v", first, err)
	}
	// It followed the job with waits for its changes, not with reads.
	if stack.WaitInstances() == 0 {
		t.Fatal("the job's page never waited for a change (the wait function never ran)")
	}
	screenshot(t, ctx, "dashboard-job")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#cancel`)), chromedp.WaitVisible(chromedp.CSS(`.flash`))); err != nil {
		t.Fatalf("cancel from the page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("status").textContent === "cancelled"`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the page never showed the job cancelled: %v", err)
	}
	if got, _ := waitFinal(t, "browser", v.ID, 20*time.Second); got.Status != jobs.StatusCancelled {
		t.Fatalf("after the cancel button: %+v", got)
	}
}

// A flaky job that failed is retried from its page and succeeds.
func TestDashboardRetriesAFailedJob(t *testing.T) {
	ctx, base := browser(t, "browser-retry")
	v := enqueue(t, "browser-retry", examplekinds.Flaky, `{"fail_times":4}`)
	if got, _ := waitFinal(t, "browser-retry", v.ID, 60*time.Second); got.Status != jobs.StatusFailed {
		t.Fatalf("the flaky job: %+v", got)
	}
	link := chromedp.CSS(`a[href="/jobs/` + v.ID + `"]`)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/jobs?status=failed"), chromedp.WaitVisible(link)); err != nil {
		t.Fatalf("the failed jobs: %v", err)
	}
	listed, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#jobs tbody`)))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(link),
		chromedp.WaitEnabled(chromedp.CSS(`#retry`)),
		chromedp.Click(chromedp.CSS(`#retry`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	); err != nil {
		t.Fatalf("retry from the page: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("status").textContent === "succeeded"`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page never showed the retried job succeeded: %v", err)
	}
	if !strings.Contains(listed, "still_failing") {
		t.Fatalf("the failed list shows %q", listed)
	}
	if got, _ := waitFinal(t, "browser-retry", v.ID, 10*time.Second); got.Status != jobs.StatusSucceeded || !strings.Contains(string(got.Result), `"succeeded_on_attempt":5`) {
		t.Fatalf("after the retry button: %+v", got)
	}
}

// A message on the dead-letter queue is shown by its shape, sort and
// sender; an envelope (not a job reference, which anyone able to send to
// the DLQ could have planted) has no plain Redrive button but "Redrive
// anyway", which asks first; redriven so, it becomes a job.
func TestDashboardRedrivesADeadLetter(t *testing.T) {
	ctx, base := browser(t, "local")
	key := fmt.Sprintf("dlq-%d", time.Now().UnixNano())
	body, _ := json.Marshal(map[string]any{"kind": "example.hash", "payload": map[string]any{"text": "from the DLQ", "rounds": 1}, "idempotency_key": key})
	out, err := localaws.SQSClient(stack.SQSEndpoint).SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(stack.Queues.DLQ), MessageBody: aws.String(string(body))})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.MessageId)
	redrive := chromedp.CSS(`button[aria-label="Redrive message ` + id + ` anyway"]`)
	// The page shows the depths; its button shows the messages (a POST:
	// showing them receives them).
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/dlq"), chromedp.WaitVisible(chromedp.CSS(`#dlq-depth`)), chromedp.Click(chromedp.CSS(`#peek`)), chromedp.WaitVisible(redrive)); err != nil {
		t.Fatalf("the dead-letter page: %v", err)
	}
	shape, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`table tbody`)))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(shape, "from the DLQ") || !strings.Contains(shape, "idempotency_key") || !strings.Contains(shape, "no route accepts a message of this shape") ||
		!strings.Contains(shape, "envelope") {
		t.Fatalf("the message is not shown by its shape and sort alone: %q", shape)
	}
	if html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS(`table tbody`))); err != nil || strings.Contains(html, `aria-label="Redrive message `+id+`"`) {
		t.Fatalf("an envelope has a plain Redrive button (%v): %s", err, html)
	}
	// "Redrive anyway" asks first: accept.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	if err := chromedp.Do(ctx, chromedp.Click(redrive), chromedp.WaitVisible(chromedp.CSS(`.flash`))); err != nil {
		t.Fatalf("redrive: %v", err)
	}
	job := wire.DerivedID("envelope-idempotency", examplekinds.DefaultRouteOwner, key)
	if got, _ := waitFinal(t, "local", job, 30*time.Second); got.Status != jobs.StatusSucceeded {
		t.Fatalf("the redriven message's job: %+v", got)
	}
	// The overview shows the queues and the kinds' counts.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#queue-depth`))); err != nil {
		t.Fatalf("the overview: %v", err)
	}
	overview, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`main`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(overview, "example.hash") {
		t.Fatalf("the overview shows %q", overview)
	}
	screenshot(t, ctx, "dashboard-overview")
}

// The Events page shows what the local bus received, newest first, and
// leads to each event's job. (The shared stack announces no outcomes: the
// test puts its job's event on the bus as the worker would.)
func TestDashboardShowsTheLocalBusEvents(t *testing.T) {
	ctx, base := browser(t, "browser-events")
	v := enqueue(t, "browser-events", "example.hash", `{"text":"event","rounds":1}`)
	done, _ := waitFinal(t, "browser-events", v.ID, 30*time.Second)
	detail, _ := json.Marshal(jobs.Event{ID: v.ID + "/1", JobID: v.ID, Sequence: 1, Kind: done.Kind, Status: done.Status, Attempt: done.Attempt, FinishedAt: time.Now().UTC()})
	client := eventbridge.NewFromConfig(aws.Config{Region: localaws.Region, BaseEndpoint: aws.String(stack.APIURL + localstack.EventBusPath), Credentials: aws.AnonymousCredentials{}})
	if _, err := eventbus.New(client, localstack.LocalEventBus, eventbus.Config{}).Put(context.Background(), []driver.Event{{DetailType: jobs.EventDetailType, Detail: detail}}); err != nil {
		t.Fatal(err)
	}
	link := chromedp.CSS(`#events a[href="/jobs/` + v.ID + `"]`)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/events?kind=example.hash"), chromedp.WaitVisible(link)); err != nil {
		t.Fatalf("the events page: %v", err)
	}
	row, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#events tbody tr:first-child`)))
	if err != nil || !strings.Contains(row, v.ID+"/1") || !strings.Contains(row, "succeeded") {
		t.Fatalf("the newest event's row: %q %v", row, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(link), chromedp.WaitVisible(chromedp.CSS(`#job`))); err != nil {
		t.Fatalf("the event's job: %v", err)
	}
	if status, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#status`))); err != nil || status != "succeeded" {
		t.Fatalf("the event's job page shows %q %v", status, err)
	}
}

// Another website the operator visits cannot make the dashboard act with
// the operator's identity: from another loopback port (another origin of
// the same site) and from localhost (another site), a form that submits
// itself to a queued job's cancel route and a no-cors fetch of the bulk
// cancel are refused before the dashboard calls the API; the job stays
// queued. A request for another Host (DNS rebinding) gets no page.
func TestDashboardRefusesOtherSites(t *testing.T) {
	const caller = "browser-csrf"
	ctx := chromium(t)
	// A job that stays queued for an hour: the worker leaves it alone.
	a := call(t, "POST", "/v1/jobs", caller, "application/json", `{"kind":"example.hash","payload":{"text":"stay","rounds":1},"delay":3600}`)
	var v jobs.View
	if err := json.Unmarshal([]byte(a.body), &v); a.status != http.StatusAccepted || err != nil {
		t.Fatalf("enqueue a delayed job: %d %s", a.status, a.body)
	}
	t.Cleanup(func() { call(t, "POST", "/v1/jobs/"+v.ID+"/cancel", caller, "", "") })

	// The dashboard counts the calls it makes to the API and reports each
	// request it answered.
	var apiCalls atomic.Int64
	type answer struct {
		route  string
		status int
	}
	answered := make(chan answer, 64)
	srv := serveDashboard(t, caller, func(cfg *dashboard.Config) {
		client := &http.Client{Timeout: 15 * time.Second}
		cfg.Do = func(r *http.Request) (*http.Response, error) {
			apiCalls.Add(1)
			return client.Do(r)
		}
	}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			h.ServeHTTP(sw, r)
			select {
			case answered <- answer{r.Method + " " + r.URL.Path, sw.status}:
			default: // more than the test reads: it never blocks the server
			}
		})
	})

	// The attacker's page, once loaded: first the fetch, then the form
	// (which leaves the page).
	attack := fmt.Sprintf(`<!doctype html><html><head><title>cute cats</title></head><body>
<form id="f" method="post" action="%[1]s/jobs/%[2]s/cancel"><input type="hidden" name="x" value="1"></form>
<script>
window.addEventListener("load", function () {
  fetch(%[3]s + "/bulk/cancel", {method: "POST", mode: "no-cors", body: new URLSearchParams({status: "queued", query: "status=queued"})})
    .catch(function () {})
    .then(function () { document.getElementById("f").submit(); });
});
</script></body></html>`, srv.URL, v.ID, jsString(srv.URL))
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, attack)
	}))
	t.Cleanup(attacker.Close)
	_, port, _ := net.SplitHostPort(attacker.Listener.Addr().String())
	for _, from := range []string{attacker.URL, "http://localhost:" + port} {
		if err := chromedp.Do(ctx, chromedp.Navigate(from+"/")); err != nil {
			t.Fatalf("the attacker's page at %s: %v", from, err)
		}
		want := map[string]bool{"POST /jobs/" + v.ID + "/cancel": true, "POST /bulk/cancel": true}
		timeout := time.After(30 * time.Second)
		for len(want) > 0 {
			select {
			case got := <-answered:
				if want[got.route] && got.status != http.StatusForbidden {
					t.Errorf("from %s, %s: %d, want 403", from, got.route, got.status)
				}
				delete(want, got.route)
			case <-timeout:
				t.Fatalf("from %s, the dashboard never received %v", from, want)
			}
		}
		// The browser shows the dashboard's refusal of the form.
		shown := fmt.Sprintf(`location.href === %s && document.body !== null && document.body.innerText.includes("cross-origin request refused")`, jsString(srv.URL+"/jobs/"+v.ID+"/cancel"))
		if err := waitAcrossNavigation(ctx, shown, 20*time.Second); err != nil {
			t.Fatalf("from %s, the browser never showed the refused form: %v", from, err)
		}
	}
	if n := apiCalls.Load(); n != 0 {
		t.Fatalf("the dashboard made %d API calls for the other sites' requests, want 0", n)
	}
	if _, got := get(t, caller, v.ID); got.Status != jobs.StatusQueued {
		t.Fatalf("after the other sites' requests the job is %s, want queued", got.Status)
	}

	// Another Host gets no page, and makes no call.
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		req, _ := http.NewRequest(method, srv.URL+"/jobs/"+v.ID, nil)
		req.Host = "evil.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest || strings.Contains(string(body), v.ID) {
			t.Fatalf("%s with Host evil.example: %d %q, want 421 and no page", method, resp.StatusCode, body)
		}
	}
	if n := apiCalls.Load(); n != 0 {
		t.Fatalf("the dashboard made %d API calls for another Host, want 0", n)
	}
	// The count counts: the dashboard's own page of the job reads it.
	resp, err := http.Get(srv.URL + "/jobs/" + v.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "queued") || apiCalls.Load() == 0 {
		t.Fatalf("the job's own page: %d, %d API calls", resp.StatusCode, apiCalls.Load())
	}
}

// waitAcrossNavigation evaluates expr in the page every 50 ms until it is
// true, through navigations (chromedp.Poll fails when the page it polls
// goes away).
func waitAcrossNavigation(ctx context.Context, expr string, within time.Duration) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(within)
	var last error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return nil
		}
		last = err
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("%s still false after %v (last error: %v)", expr, within, last)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
