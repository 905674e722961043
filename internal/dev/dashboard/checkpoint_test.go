package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/dashboard"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// checkpointMarker is in the checkpoint only: no answer may contain it.
const checkpointMarker = "CHECKPOINT-ONLY-7f3a9c"

// A checkpoint is private: a job that stored one (and continues from it)
// is read through the real API behind the local gateway and through the
// dashboard over that API, and neither GET /v1/jobs/{id}, the GET /v1/jobs
// listing nor the dashboard's job and jobs pages contain the checkpoint's
// content or its sealed form. The job's page shows its lane.
func TestACheckpointIsNeverShown(t *testing.T) {
	ctx := context.Background()
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "export", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.JSON[int], error) {
		if err := job.Checkpoint(ctx, map[string]string{"cursor": checkpointMarker}); err != nil {
			return jobs.JSON[int]{}, err
		}
		if err := job.Publish(ctx, jobs.JSON[int]{V: 1}); err != nil {
			return jobs.JSON[int]{}, err
		}
		return jobs.JSON[int]{}, jobs.Continue(nil) // queued again, its checkpoint kept
	}, &jobs.KindOpts{Lane: "long"})
	sealer, err := jobs.NewAESSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer, PageTokenKey: bytes.Repeat([]byte("p"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer, Lane: "long", CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	// The real API in process, as the enqueue, getjob and cancel
	// functions serve it.
	fn := localstack.FunctionHandler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse](httpapi.New(svc, httpapi.Config{}).Route)
	gw := httptest.NewServer(&localstack.Gateway{Enqueue: fn, GetJob: fn, Cancel: fn, Schedules: fn})
	t.Cleanup(gw.Close)
	call := func(method, path, body string) string {
		t.Helper()
		req, _ := http.NewRequest(method, gw.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(localstack.CallerHeader, "team")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		return string(b)
	}
	var v jobs.View
	if err := json.Unmarshal([]byte(call("POST", "/v1/jobs", `{"kind":"export","payload":{}}`)), &v); err != nil {
		t.Fatal(err)
	}
	if resp, _ := w.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: message.Encode(v.ID)}}}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	rec, err := store.Get(ctx, v.ID)
	if err != nil || len(rec.Checkpoint) == 0 || rec.Continuations != 1 {
		t.Fatalf("job %+v, %v: want one continuation with a stored checkpoint", rec, err)
	}
	// The sealed form, past its version and key id.
	sealed := string(rec.Checkpoint)
	sealed = sealed[strings.LastIndexByte(sealed, '.')+1:][:40]

	u, _ := url.Parse(gw.URL)
	dash := serve(t, dashboard.Config{API: u, Caller: "team"})
	page := func(path string) string {
		t.Helper()
		code, body, _ := get(t, dash.URL+path)
		if code != http.StatusOK {
			t.Fatalf("dashboard %s: %d %s", path, code, body)
		}
		return body
	}
	answers := map[string]string{
		"GET /v1/jobs/{id}":    call("GET", "/v1/jobs/"+v.ID, ""),
		"GET /v1/jobs":         call("GET", "/v1/jobs", ""),
		"the dashboard's job":  page("/jobs/" + v.ID),
		"the dashboard's jobs": page("/jobs"),
	}
	for what, body := range answers {
		if !strings.Contains(body, v.ID) {
			t.Fatalf("%s does not show the job: %s", what, body)
		}
		for _, leak := range []string{checkpointMarker, "cursor", sealed} {
			if strings.Contains(body, leak) {
				t.Errorf("%s contains %q, from the checkpoint:\n%s", what, leak, body)
			}
		}
	}
	if !strings.Contains(answers["GET /v1/jobs/{id}"], `"lane":"long"`) || !strings.Contains(answers["the dashboard's job"], `<dd id="lane">long</dd>`) {
		t.Errorf("the API or the job's page does not say the job's lane:\n%s\n%s", answers["GET /v1/jobs/{id}"], answers["the dashboard's job"])
	}
}
