package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// fakeScheduler holds schedules like Scheduler's API, and injects
// faults: down fails every call; fail["create"|"get"|"update"|"delete"]
// fails that call, which changes nothing; lose[...] lets that call land
// and loses its answer.
type fakeScheduler struct {
	mu             sync.Mutex
	made           map[string]driver.HeldSchedule // id -> what it holds
	down           bool
	fail, lose     map[string]bool
	calls, updates int
}

var errSchedulerDown = errors.New("scheduler unavailable")

func held(s jobs.Schedule, message string) driver.HeldSchedule {
	return driver.HeldSchedule{Expression: s.Expression, TimeZone: s.TimeZone, Message: message, TargetMatches: true}
}

// call runs op's effect unless the call fails, and answers as faults say.
func (f *fakeScheduler) call(op string, effect func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if op == "create" {
		f.calls++
	}
	if f.down || f.fail[op] {
		return errSchedulerDown
	}
	if err := effect(); err != nil {
		return err
	}
	if f.lose[op] {
		return errSchedulerDown
	}
	return nil
}

func (f *fakeScheduler) CreateSchedule(_ context.Context, id string, s jobs.Schedule, message string) error {
	return f.call("create", func() error {
		if _, ok := f.made[id]; ok {
			return driver.ErrExists
		}
		f.made[id] = held(s, message)
		return nil
	})
}

func (f *fakeScheduler) GetSchedule(_ context.Context, id string) (*driver.HeldSchedule, error) {
	var h driver.HeldSchedule
	err := f.call("get", func() error {
		var ok bool
		if h, ok = f.made[id]; !ok {
			return jobs.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &h, nil
}

func (f *fakeScheduler) UpdateSchedule(_ context.Context, id string, s jobs.Schedule, message string) error {
	return f.call("update", func() error {
		if _, ok := f.made[id]; !ok {
			return jobs.ErrNotFound
		}
		f.updates++
		f.made[id] = held(s, message)
		return nil
	})
}

func (f *fakeScheduler) DeleteSchedule(_ context.Context, id string) error {
	return f.call("delete", func() error {
		delete(f.made, id)
		return nil
	})
}

// faults sets the faults of the next calls.
func (f *fakeScheduler) faults(fail, lose []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.lose = map[string]bool{}, map[string]bool{}
	for _, op := range fail {
		f.fail[op] = true
	}
	for _, op := range lose {
		f.lose[op] = true
	}
}

type schedEnv struct {
	api   *httpapi.Schedules
	sched *fakeScheduler
	store *jobstest.MemStore
}

func newSchedEnv(t *testing.T, perOwner int) *schedEnv {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", func(context.Context, *jobs.Job[echoPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	type card struct {
		Number string `json:"number" jobs:"secret"`
	}
	jobs.MustRegister(reg, "card", func(context.Context, *jobs.Job[card]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	e := &schedEnv{sched: &fakeScheduler{made: map[string]driver.HeldSchedule{}}, store: jobstest.NewMemStore(nil)}
	sealer, err := jobs.NewAESSealer([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := testroles.Schedules(jobs.Config{Registry: reg, Store: e.store, Scheduler: e.sched, SchedulesPerOwner: perOwner, Sealer: sealer})
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
	for id, h := range e.sched.made {
		msg := h.Message
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
		{`{"name":"big","expression":"rate(1 hour)","kind":"echo","payload":{"text":"` + strings.Repeat("a", 8<<10) + `"}}`, 400, "invalid_request"},
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
	// Scheduler refuses (and says it holds nothing): 503, nothing kept.
	e.sched.faults([]string{"create"}, nil)
	if p := decodeProblem(t, e.do(t, "me", http.MethodPost, "/v1/schedules", third)); p.Status != http.StatusServiceUnavailable || p.Code != "unavailable" {
		t.Fatalf("create Scheduler refused: %+v", p)
	}
	e.sched.faults(nil, nil)
	if resp := e.do(t, "me", http.MethodGet, "/v1/schedules/third", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a schedule Scheduler refused was kept: %d", resp.StatusCode)
	}
	// Scheduler down, so it may or may not have made it: 503, and the
	// definition is kept (listed, deletable) until the same request
	// again completes it.
	e.sched.down = true
	if p := decodeProblem(t, e.do(t, "me", http.MethodPost, "/v1/schedules", third)); p.Status != http.StatusServiceUnavailable || !strings.Contains(p.Detail, "kept") {
		t.Fatalf("create with Scheduler down: %+v", p)
	}
	e.sched.down = false
	if resp := e.do(t, "me", http.MethodGet, "/v1/schedules/third", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("a schedule Scheduler did not confirm is not listed: %d", resp.StatusCode)
	}
	if resp := e.do(t, "me", http.MethodPost, "/v1/schedules", third); resp.StatusCode != http.StatusCreated {
		t.Fatalf("the same request once Scheduler is back: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := e.do(t, "me", http.MethodDelete, "/v1/schedules/third", ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete third: %d %s", resp.StatusCode, resp.Body)
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

// The API's definitions and Scheduler's schedules never diverge: a
// create whose answer is lost is adopted (at once, or by the same request
// again when Scheduler could not be asked), or cleaned; a schedule under
// the name with another definition, which no definition names, is updated
// to the request's, never adopted as it is; a delete whose answer is lost
// is done.
func TestSchedulesReconcileWithScheduler(t *testing.T) {
	owner, _ := httpapi.Owner(schedRequest(t, "me", http.MethodGet, "/v1/schedules", ""))
	id := wire.SchedulerName(wire.OwnerKey(owner), "hourly.echo")
	created := func(t *testing.T, resp events.APIGatewayV2HTTPResponse) httpapi.ScheduleView {
		t.Helper()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
		}
		var v httpapi.ScheduleView
		if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// holds checks that Scheduler holds exactly the request's schedule.
	holds := func(t *testing.T, e *schedEnv) {
		t.Helper()
		h, ok := e.sched.made[id]
		if len(e.sched.made) != 1 || !ok || h.Expression != "cron(0 * * * ? *)" || h.TimeZone != "Europe/Paris" || !h.TargetMatches ||
			!strings.Contains(h.Message, `"lambdajobs_schedule":"hourly.echo"`) {
			t.Fatalf("Scheduler holds %+v, want only %s as asked", e.sched.made, id)
		}
	}
	listed := func(t *testing.T, e *schedEnv) int {
		t.Helper()
		return e.do(t, "me", http.MethodGet, "/v1/schedules/hourly.echo", "").StatusCode
	}

	t.Run("a create whose answer is lost is adopted", func(t *testing.T) {
		e := newSchedEnv(t, 5)
		e.sched.faults(nil, []string{"create"})
		v := created(t, e.do(t, "me", http.MethodPost, "/v1/schedules", hourly))
		holds(t, e)
		e.sched.faults(nil, nil)
		if again := created(t, e.do(t, "me", http.MethodPost, "/v1/schedules", hourly)); !again.CreatedAt.Equal(v.CreatedAt) || e.sched.updates != 0 {
			t.Fatalf("the same request again: %+v after %+v, %d updates", again, v, e.sched.updates)
		}
		holds(t, e)
	})
	t.Run("a lost answer Scheduler cannot confirm is kept, and the retry adopts it", func(t *testing.T) {
		e := newSchedEnv(t, 5)
		e.sched.faults([]string{"get", "delete"}, []string{"create"})
		if p := decodeProblem(t, e.do(t, "me", http.MethodPost, "/v1/schedules", hourly)); p.Status != http.StatusServiceUnavailable || p.Code != "unavailable" {
			t.Fatalf("create: %+v", p)
		}
		holds(t, e) // it fires: so it must be listed, and deletable
		if got := listed(t, e); got != http.StatusOK {
			t.Fatalf("the schedule Scheduler holds is not listed: %d", got)
		}
		e.sched.faults(nil, nil)
		created(t, e.do(t, "me", http.MethodPost, "/v1/schedules", hourly))
		holds(t, e)
		if e.sched.updates != 0 {
			t.Fatalf("%d updates of a schedule already as asked", e.sched.updates)
		}
		if resp := e.do(t, "me", http.MethodDelete, "/v1/schedules/hourly.echo", ""); resp.StatusCode != http.StatusNoContent || len(e.sched.made) != 0 {
			t.Fatalf("delete: %d, Scheduler holds %v", resp.StatusCode, e.sched.made)
		}
	})
	t.Run("a lost answer Scheduler cannot confirm is cleaned when it can be deleted", func(t *testing.T) {
		e := newSchedEnv(t, 5)
		e.sched.faults([]string{"get"}, []string{"create"})
		if p := decodeProblem(t, e.do(t, "me", http.MethodPost, "/v1/schedules", hourly)); p.Status != http.StatusServiceUnavailable || strings.Contains(p.Detail, "kept") {
			t.Fatalf("create: %+v", p)
		}
		if got := listed(t, e); got != http.StatusNotFound || len(e.sched.made) != 0 {
			t.Fatalf("after a 503 that kept nothing: listed %d, Scheduler holds %v", got, e.sched.made)
		}
		e.sched.faults(nil, nil)
		created(t, e.do(t, "me", http.MethodPost, "/v1/schedules", hourly))
		holds(t, e)
	})
	t.Run("another definition under the name is updated, never adopted", func(t *testing.T) {
		for name, other := range map[string]driver.HeldSchedule{
			"another expression": {Expression: "cron(0 3 * * ? *)", TimeZone: "Europe/Paris", TargetMatches: true},
			"another target":     {Expression: "cron(0 * * * ? *)", TimeZone: "Europe/Paris", TargetMatches: false},
		} {
			t.Run(name, func(t *testing.T) {
				e := newSchedEnv(t, 5)
				// Left by an earlier request: no definition names it.
				e.created(t)
				other.Message = e.sched.made[id].Message
				e.sched.made[id] = other
				e.removeDefinition(t, owner)
				created(t, e.do(t, "me", http.MethodPost, "/v1/schedules", hourly))
				holds(t, e)
				if e.sched.updates != 1 {
					t.Fatalf("%d updates, want 1", e.sched.updates)
				}
			})
		}
	})
	t.Run("a stored definition with another definition is refused", func(t *testing.T) {
		e := newSchedEnv(t, 5)
		e.created(t)
		changed := strings.Replace(hourly, "cron(0 * * * ? *)", "cron(0 3 * * ? *)", 1)
		if p := decodeProblem(t, e.do(t, "me", http.MethodPost, "/v1/schedules", changed)); p.Status != http.StatusConflict || p.Code != "schedule_exists" {
			t.Fatalf("the same name with another expression: %+v", p)
		}
		holds(t, e)
	})
	t.Run("a delete whose answer is lost is done", func(t *testing.T) {
		e := newSchedEnv(t, 5)
		e.created(t)
		e.sched.faults(nil, []string{"delete"})
		if resp := e.do(t, "me", http.MethodDelete, "/v1/schedules/hourly.echo", ""); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("delete: %d %s", resp.StatusCode, resp.Body)
		}
		if got := listed(t, e); got != http.StatusNotFound || len(e.sched.made) != 0 {
			t.Fatalf("after delete: listed %d, Scheduler holds %v", got, e.sched.made)
		}
	})
	t.Run("a delete whose answer is lost and cannot be checked is repeated", func(t *testing.T) {
		e := newSchedEnv(t, 5)
		e.created(t)
		e.sched.faults([]string{"get"}, []string{"delete"})
		if p := decodeProblem(t, e.do(t, "me", http.MethodDelete, "/v1/schedules/hourly.echo", "")); p.Status != http.StatusServiceUnavailable {
			t.Fatalf("delete: %+v", p)
		}
		if got := listed(t, e); got != http.StatusOK {
			t.Fatalf("a schedule whose deletion is unconfirmed is not listed: %d", got)
		}
		e.sched.faults(nil, nil)
		if resp := e.do(t, "me", http.MethodDelete, "/v1/schedules/hourly.echo", ""); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("delete again: %d %s", resp.StatusCode, resp.Body)
		}
		if got := listed(t, e); got != http.StatusNotFound || len(e.sched.made) != 0 {
			t.Fatalf("after delete: listed %d, Scheduler holds %v", got, e.sched.made)
		}
	})
}

// created creates the hourly schedule.
func (e *schedEnv) created(t *testing.T) {
	t.Helper()
	if resp := e.do(t, "me", http.MethodPost, "/v1/schedules", hourly); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
	}
}

// removeDefinition removes the hourly schedule's definition, leaving
// Scheduler's schedule behind.
func (e *schedEnv) removeDefinition(t *testing.T, owner string) {
	t.Helper()
	if err := e.store.RemoveOwnerSchedule(context.Background(), wire.OwnerKey(owner), "hourly.echo"); err != nil {
		t.Fatal(err)
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
	for _, h := range e.sched.made {
		msg = h.Message
	}
	reg := jobs.NewRegistry()
	runs := 0
	jobs.MustRegister(reg, "echo", func(_ context.Context, j *jobs.Job[echoPayload]) (jobs.NoResult, error) {
		runs++
		if j.Payload.Text != "hi" {
			t.Errorf("payload %+v", j.Payload)
		}
		return jobs.NoResult{}, nil
	}, nil)
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: e.store, CancelCheck: -1, Concurrency: 1})
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
	var f wire.Fire
	_ = json.Unmarshal([]byte(fire), &f)
	at, _ := jobsTime("2026-11-30T09:00:00Z")
	rec, err := e.store.Get(context.Background(), wire.RuntimeFireJobID(f.OwnerKey, "hourly.echo", at))
	owner, _ := httpapi.Owner(schedRequest(t, "me", http.MethodGet, "/v1/schedules", ""))
	if err != nil || rec.Owner != owner || rec.Status != jobs.StatusSucceeded || wire.OwnerKey(owner) != f.OwnerKey {
		t.Fatalf("the fire's job: %+v %v", rec, err)
	}
	e.do(t, "me", http.MethodDelete, "/v1/schedules/hourly.echo", "")
	late := strings.Replace(msg, "<aws.scheduler.scheduled-time>", "2026-11-30T10:00:00Z", 1)
	if resp, _ := w.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "d", Body: late}}}); len(resp.BatchItemFailures) != 0 || runs != 1 {
		t.Fatalf("a fire after the deletion: failures %v, runs %d", resp.BatchItemFailures, runs)
	}
}

func jobsTime(s string) (t time.Time, err error) { return time.Parse(time.RFC3339, s) }

// A runtime schedule whose kind the worker does not register (a deploy
// adding it in progress, or the kind left the code) settles each fire
// with one job owned by the schedule's owner, handed back for a worker
// that registers the kind (it fails unknown_kind 30 minutes on): no panic,
// no message back on the queue (so none in the DLQ), and a duplicate
// delivery makes no second job. The next fire, while that job waits, is
// skipped by the schedule's overlap policy.
func TestRuntimeScheduleOfAnUnregisteredKind(t *testing.T) {
	e := newSchedEnv(t, 5)
	if resp := e.do(t, "me", http.MethodPost, "/v1/schedules", hourly); resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, resp.Body)
	}
	var msg string
	for _, h := range e.sched.made {
		msg = h.Message
	}
	reg := jobs.NewRegistry() // "echo" is gone from the worker's code
	jobs.MustRegister(reg, "other", func(context.Context, *jobs.Job[echoPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	var logs strings.Builder
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: e.store, CancelCheck: -1, Concurrency: 1,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	owner, _ := httpapi.Owner(schedRequest(t, "me", http.MethodGet, "/v1/schedules", ""))
	for _, at := range []string{"2026-11-30T09:00:00Z", "2026-11-30T10:00:00Z"} {
		fire := strings.Replace(msg, "<aws.scheduler.scheduled-time>", at, 1)
		for _, delivery := range []string{"first", "again"} {
			ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: at + delivery, Body: fire}}}
			if resp, _ := w.HandleSQS(context.Background(), ev); len(resp.BatchItemFailures) != 0 {
				t.Fatalf("fire at %s (%s): the message comes back: %v", at, delivery, resp.BatchItemFailures)
			}
		}
		when, _ := jobsTime(at)
		rec, err := e.store.Get(context.Background(), wire.RuntimeFireJobID(wire.OwnerKey(owner), "hourly.echo", when))
		if at != "2026-11-30T09:00:00Z" {
			// The first fire's job has not finished: the schedule's overlap
			// policy skips this one.
			if !errors.Is(err, jobs.ErrNotFound) {
				t.Fatalf("the fire at %s while the first one's job waits: %+v %v, want it skipped", at, rec, err)
			}
			continue
		}
		// Handed back, no attempt spent, for a worker that registers the
		// kind (a deploy may be adding it); unknown_kind 30 minutes on.
		if err != nil || rec.Status != jobs.StatusQueued || rec.WaitingOn != "kind" || rec.Attempt != 0 || rec.Owner != owner || rec.Kind != "echo" {
			t.Fatalf("the fire's job at %s: %+v %v", at, rec, err)
		}
	}
	if strings.Contains(logs.String(), "panicked") {
		t.Fatalf("the worker panicked: %s", logs.String())
	}
}
