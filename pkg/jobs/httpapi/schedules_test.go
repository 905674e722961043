package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// fakeScheduler records the schedules created, like Scheduler's API.
type fakeScheduler struct {
	mu    sync.Mutex
	made  map[string]string // id -> message
	down  bool
	calls int
}

func (f *fakeScheduler) CreateSchedule(_ context.Context, id string, _ jobs.Schedule, message string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return errors.New("scheduler unavailable")
	}
	if _, ok := f.made[id]; ok {
		return jobs.ErrScheduleExists
	}
	f.made[id] = message
	return nil
}

func (f *fakeScheduler) DeleteSchedule(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("scheduler unavailable")
	}
	delete(f.made, id)
	return nil
}

type schedEnv struct {
	api   *httpapi.Schedules
	sched *fakeScheduler
	store *jobstest.MemStore
}

func newSchedEnv(t *testing.T, perOwner int) *schedEnv {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", jobs.HandlerFunc[echoPayload, jobs.NoResult](func(context.Context, *jobs.Job[echoPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}))
	type card struct {
		Number string `json:"number" jobs:"secret"`
	}
	jobs.MustRegister(reg, "card", jobs.HandlerFunc[card, jobs.NoResult](func(context.Context, *jobs.Job[card]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}))
	e := &schedEnv{sched: &fakeScheduler{made: map[string]string{}}, store: jobstest.NewMemStore(nil)}
	svc, err := jobs.NewScheduleService(jobs.ScheduleServiceConfig{Registry: reg, Store: e.store, Scheduler: e.sched, PerOwner: perOwner})
	if err != nil {
		t.Fatal(err)
	}
	e.api = httpapi.NewSchedules(svc, nil)
	return e
}

// request is a schedules request by the IAM caller of the fixture, or by
// another role when who is "other".
func schedRequest(t *testing.T, who, method, path, body string) events.APIGatewayV2HTTPRequest {
	req := fixture(t, "post-iam.json")
	req.RequestContext.HTTP.Method = method
	req.RawPath, req.RequestContext.HTTP.Path = path, path
	req.Body, req.IsBase64Encoded = body, false
	req.PathParameters = nil
	if who == "other" {
		req.RequestContext.Authorizer.IAM.UserARN = "arn:aws:sts::123456789012:assumed-role/billing-service/s1"
	}
	return req
}

func (e *schedEnv) do(t *testing.T, who, method, path, body string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := e.api.Route(context.Background(), schedRequest(t, who, method, path, body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const hourly = `{"name":"hourly.echo","expression":"cron(0 * * * ? *)","time_zone":"Europe/Paris","kind":"echo","payload":{"text":"hi"},"overlap":"skip"}`

// Every status of the schedules API, and owner isolation: another owner's
// schedules never appear and their names behave like unknown ones.
func TestSchedulesAPI(t *testing.T) {
	e := newSchedEnv(t, 2)
	resp := e.do(t, "me", http.MethodPost, "/v1/schedules", hourly)
	if resp.StatusCode != http.StatusCreated || resp.Headers["Location"] != "/v1/schedules/hourly.echo" {
		t.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
	}
	var v httpapi.ScheduleView
	if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Name != "hourly.echo" || v.TimeZone != "Europe/Paris" || v.Overlap != jobs.OverlapSkip || string(v.Payload) != `{"text":"hi"}` ||
		v.NextFire == nil || v.NextFire.Minute() != 0 || v.CreatedAt.IsZero() {
		t.Fatalf("created view %+v", v)
	}
	if len(e.sched.made) != 1 {
		t.Fatalf("scheduler has %v", e.sched.made)
	}
	for id, msg := range e.sched.made {
		if !strings.HasSuffix(id, "-hourly.echo") || !strings.Contains(msg, `"scheduled_time":"<aws.scheduler.scheduled-time>"`) || !strings.Contains(msg, `"owner_key":"`) ||
			strings.Contains(id, "orders-service") || strings.Contains(msg, "orders-service") {
			t.Fatalf("scheduler schedule %s: %s (the owner must appear only as its key)", id, msg)
		}
	}
	// The same request again is the same schedule.
	if resp := e.do(t, "me", http.MethodPost, "/v1/schedules", hourly); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create again: %d %s", resp.StatusCode, resp.Body)
	}
	// Reads.
	if resp := e.do(t, "me", http.MethodGet, "/v1/schedules", ""); resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"name":"hourly.echo"`) {
		t.Fatalf("list: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := e.do(t, "me", http.MethodGet, "/v1/schedules/hourly.echo", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("get: %d %s", resp.StatusCode, resp.Body)
	}
	// Another owner sees nothing, cannot read or delete it, and may use
	// the same name.
	if resp := e.do(t, "other", http.MethodGet, "/v1/schedules", ""); resp.StatusCode != http.StatusOK || resp.Body != `{"schedules":[]}` {
		t.Fatalf("another owner's list: %d %s", resp.StatusCode, resp.Body)
	}
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		if p := decodeProblem(t, e.do(t, "other", m, "/v1/schedules/hourly.echo", "")); p.Status != http.StatusNotFound || p.Code != "not_found" {
			t.Fatalf("another owner's %s: %+v", m, p)
		}
	}
	if resp := e.do(t, "other", http.MethodPost, "/v1/schedules", hourly); resp.StatusCode != http.StatusCreated {
		t.Fatalf("another owner's same name: %d %s", resp.StatusCode, resp.Body)
	}
	// Refusals, none of which stores or creates anything.
	before := len(e.sched.made)
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{strings.Replace(hourly, "cron(0 * * * ? *)", "cron(0 * * * * *)", 1), 400, "invalid_request"},
		{strings.Replace(hourly, "Europe/Paris", "Mars/Olympus", 1), 400, "invalid_request"},
		{strings.Replace(hourly, `"hourly.echo"`, `"bad name"`, 1), 400, "invalid_request"},
		{strings.Replace(hourly, `"hourly.echo"`, `"`+strings.Repeat("n", 48)+`"`, 1), 400, "invalid_request"},
		{strings.Replace(hourly, `"skip"`, `"queue"`, 1), 400, "invalid_request"},
		{strings.Replace(hourly, `"kind":"echo"`, `"kind":"nope"`, 1), 422, "unknown_kind"},
		{strings.Replace(hourly, `{"text":"hi"}`, `{"txt":"hi"}`, 1), 422, "invalid_payload"},
		{`{"name":"c","expression":"rate(1 hour)","kind":"card","payload":{"number":"4242"}}`, 400, "invalid_request"},
		{`{"name":"x","expression":"rate(1 hour)","kind":"echo"}`, 400, "invalid_request"},
		{`{"name":"big","expression":"rate(1 hour)","kind":"echo","payload":{"text":"` + strings.Repeat("a", jobs.MaxSchedulePayloadBytes) + `"}}`, 400, "invalid_request"},
		{`{"name":"x","expression":"rate(1 hour)","kind":"echo","payload":{},"extra":1}`, 400, "invalid_request"},
		{strings.Replace(hourly, `{"text":"hi"}`, `{"text":"changed"}`, 1), 409, "schedule_exists"},
	} {
		p := decodeProblem(t, e.do(t, "me", http.MethodPost, "/v1/schedules", c.body))
		if p.Status != c.status || p.Code != c.code || strings.Contains(p.Detail, "4242") {
			t.Errorf("%s: %+v, want %d %s", c.body, p, c.status, c.code)
		}
	}
	second := strings.Replace(hourly, `"hourly.echo"`, `"second"`, 1)
	if resp := e.do(t, "me", http.MethodPost, "/v1/schedules", second); resp.StatusCode != http.StatusCreated {
		t.Fatalf("second: %d %s", resp.StatusCode, resp.Body)
	}
	before++
	third := strings.Replace(hourly, `"hourly.echo"`, `"third"`, 1)
	if p := decodeProblem(t, e.do(t, "me", http.MethodPost, "/v1/schedules", third)); p.Status != http.StatusConflict || p.Code != "schedule_limit" {
		t.Fatalf("past the limit of 2: %+v", p)
	}
	if len(e.sched.made) != before {
		t.Fatalf("refused requests reached Scheduler: %v", e.sched.made)
	}
	// Scheduler down: 503 and nothing kept.
	e.sched.down = true
	e.do(t, "me", http.MethodDelete, "/v1/schedules/second", "")
	if p := decodeProblem(t, e.do(t, "me", http.MethodDelete, "/v1/schedules/second", "")); p.Status != http.StatusServiceUnavailable {
		t.Fatalf("delete with Scheduler down: %+v", p)
	}
	if resp := e.do(t, "me", http.MethodGet, "/v1/schedules/second", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("a schedule whose deletion failed is gone: %d", resp.StatusCode)
	}
	e.sched.down = false
	e.do(t, "me", http.MethodDelete, "/v1/schedules/second", "")
	e.sched.down = true
	if p := decodeProblem(t, e.do(t, "me", http.MethodPost, "/v1/schedules", third)); p.Status != http.StatusServiceUnavailable {
		t.Fatalf("create with Scheduler down: %+v", p)
	}
	e.sched.down = false
	if resp := e.do(t, "me", http.MethodGet, "/v1/schedules/third", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a schedule Scheduler refused was kept: %d", resp.StatusCode)
	}
	// Delete, then it is gone everywhere.
	if resp := e.do(t, "me", http.MethodDelete, "/v1/schedules/hourly.echo", ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, resp.Body)
	}
	if p := decodeProblem(t, e.do(t, "me", http.MethodDelete, "/v1/schedules/hourly.echo", "")); p.Status != http.StatusNotFound {
		t.Fatalf("delete twice: %+v", p)
	}
	if resp := e.do(t, "other", http.MethodGet, "/v1/schedules/hourly.echo", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("deleting mine deleted the other owner's: %d", resp.StatusCode)
	}
	// Methods and paths.
	if p := decodeProblem(t, e.do(t, "me", http.MethodPut, "/v1/schedules/x", "")); p.Status != http.StatusMethodNotAllowed {
		t.Fatalf("PUT: %+v", p)
	}
	req := schedRequest(t, "me", http.MethodGet, "/v1/schedules", "")
	req.RequestContext.Authorizer = nil
	if resp, _ := e.api.Route(context.Background(), req); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no caller: %d", resp.StatusCode)
	}
}

// A fire of a runtime schedule, delivered three times, becomes one job
// owned by the schedule's owner; after the schedule is deleted, a fire
// still on the queue makes no job.
func TestRuntimeScheduleFires(t *testing.T) {
	e := newSchedEnv(t, 5)
	if resp := e.do(t, "me", http.MethodPost, "/v1/schedules", hourly); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
	}
	var msg string
	for _, m := range e.sched.made {
		msg = m
	}
	reg := jobs.NewRegistry()
	runs := 0
	jobs.MustRegister(reg, "echo", jobs.HandlerFunc[echoPayload, jobs.NoResult](func(_ context.Context, j *jobs.Job[echoPayload]) (jobs.NoResult, error) {
		runs++
		if j.Payload.Text != "hi" {
			t.Errorf("payload %+v", j.Payload)
		}
		return jobs.NoResult{}, nil
	}))
	w, err := jobs.NewWorker(jobs.WorkerConfig{Registry: reg, Store: e.store, CancelCheck: -1, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	fire := strings.Replace(msg, "<aws.scheduler.scheduled-time>", "2026-11-30T09:00:00Z", 1)
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "a", Body: fire}, {MessageId: "b", Body: fire}, {MessageId: "c", Body: fire}}}
	if resp, _ := w.HandleSQS(context.Background(), ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if runs != 1 {
		t.Fatalf("one fire delivered 3 times ran %d times", runs)
	}
	var f jobs.Fire
	_ = json.Unmarshal([]byte(fire), &f)
	at, _ := jobsTime("2026-11-30T09:00:00Z")
	rec, err := e.store.Get(context.Background(), jobs.RuntimeFireJobID(f.OwnerKey, "hourly.echo", at))
	owner, _ := httpapi.Owner(schedRequest(t, "me", http.MethodGet, "/v1/schedules", ""))
	if err != nil || rec.Owner != owner || rec.Status != jobs.StatusSucceeded || jobs.OwnerKey(owner) != f.OwnerKey {
		t.Fatalf("the fire's job: %+v %v", rec, err)
	}
	e.do(t, "me", http.MethodDelete, "/v1/schedules/hourly.echo", "")
	late := strings.Replace(msg, "<aws.scheduler.scheduled-time>", "2026-11-30T10:00:00Z", 1)
	if resp, _ := w.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "d", Body: late}}}); len(resp.BatchItemFailures) != 0 || runs != 1 {
		t.Fatalf("a fire after the deletion: failures %v, runs %d", resp.BatchItemFailures, runs)
	}
}

func jobsTime(s string) (t time.Time, err error) { return time.Parse(time.RFC3339, s) }
