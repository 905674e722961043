package localstack_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/schedulerapi"
)

// The end-to-end test starts the whole local stack (emulators, the seven
// bootstraps under the Runtime Interface Emulator, gateway, event source) on
// free ports and drives it over HTTP only.

var (
	stack *localstack.Stack
	logs  = &testenv.SyncBuffer{}
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root, err := localaws.FindRoot()
	if err != nil {
		return 0, err
	}
	rie := os.Getenv("JOBS_TEST_RIE")
	if rie == "" {
		rie = filepath.Join(root, "bin", "aws-lambda-rie")
	}
	if _, err := os.Stat(rie); err != nil {
		return 0, fmt.Errorf("the AWS Lambda Runtime Interface Emulator is required at %s (make test installs it: make bin/aws-lambda-rie): %w", rie, err)
	}
	dir, err := os.MkdirTemp("", "lambdajobs-e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if err := localstack.BuildBootstraps(root, dir); err != nil {
		return 0, err
	}
	e2eRoot, e2eBootstraps, e2eRIE = root, dir, rie
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stack, err = localstack.Start(ctx, localstack.Config{
		Root: root, Bootstraps: dir, RIE: rie,
		APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "e2e", Queue: "e2e",
		WorkerTimeout: 8 * time.Second, APITimeout: 10 * time.Second,
		WorkerInstances: 2, BatchSize: 5,
		NoSchedules: true, // TestScheduleFires fires them itself
		Output:      logs,
	})
	if err != nil {
		return 0, fmt.Errorf("start the local stack: %w\n%s", err, logs.String())
	}
	defer stack.Stop()
	return m.Run(), nil
}

type answer struct {
	status int
	header http.Header
	body   string
}

func call(t *testing.T, method, path, caller, contentType, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, stack.APIURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if caller != "" {
		req.Header.Set(localstack.CallerHeader, caller)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func enqueue(t *testing.T, caller, kind, payload string) jobs.View {
	t.Helper()
	a := call(t, "POST", "/v1/jobs", caller, "application/json", `{"kind":"`+kind+`","payload":`+payload+`}`)
	if a.status != 202 {
		t.Fatalf("POST %s: %d %s", kind, a.status, a.body)
	}
	var v jobs.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatal(err)
	}
	if a.header.Get("Location") != "/v1/jobs/"+v.ID {
		t.Fatalf("Location %q", a.header.Get("Location"))
	}
	return v
}

func get(t *testing.T, caller, id string) (answer, jobs.View) {
	t.Helper()
	a := call(t, "GET", "/v1/jobs/"+id, caller, "", "")
	var v jobs.View
	if a.status == 200 {
		if err := json.Unmarshal([]byte(a.body), &v); err != nil {
			t.Fatal(err)
		}
	}
	return a, v
}

// waitFinal polls GET until the job is final; it records every answer.
func waitFinal(t *testing.T, caller, id string, within time.Duration) (jobs.View, []answer) {
	t.Helper()
	var seen []answer
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		a, v := get(t, caller, id)
		seen = append(seen, a)
		if v.Status.Final() {
			return v, seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not final after %v: %s", id, within, a.body)
		}
	}
	panic("unreachable")
}

// The functions under the emulator write their metrics in Embedded Metric
// Format with their output, with the kind as a dimension.
func TestWorkerWritesMetrics(t *testing.T) {
	t.Parallel()
	v := enqueue(t, "dave", "example.hash", `{"text":"metrics","rounds":1}`)
	if got, _ := waitFinal(t, "dave", v.ID, 30*time.Second); got.Status != jobs.StatusSucceeded {
		t.Fatalf("job %+v", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "[worker") && strings.Contains(line, `"JobsSucceeded"`) &&
				strings.Contains(line, `"kind":"example.hash"`) && strings.Contains(line, `"Namespace":"lambdajobs/local"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no EMF record of a succeeded example.hash job in the worker's output")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The local stack gathers those records per kind, for ljob stats.
func TestLocalStatsPerKind(t *testing.T) {
	t.Parallel()
	v := enqueue(t, "erin", "example.hash", `{"text":"stats","rounds":1}`)
	if got, _ := waitFinal(t, "erin", v.ID, 30*time.Second); got.Status != jobs.StatusSucceeded {
		t.Fatalf("job %+v", got)
	}
	waitKindStats(t, "example.hash", "no succeeded example.hash job", func(h localstack.KindStats) bool {
		return h.Counts["JobsSucceeded"] >= 1 && h.Counts["JobsEnqueued"] >= 1 && h.Durations["RunDuration"].N >= 1
	})
}

// waitKindStats reads the local stack's stats of kind until ok holds of them,
// for at most 10 s; then it fails the test, saying what was missing.
func waitKindStats(t *testing.T, kind, missing string, ok func(localstack.KindStats) bool) {
	t.Helper()
	var stats struct {
		Kinds map[string]localstack.KindStats `json:"kinds"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get(stack.APIURL + localstack.StatsPath)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&stats)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ok(stats.Kinds[kind]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats of %s %+v: %s", kind, stats.Kinds[kind], missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The local stack knows the functions' declared schedules and when they
// fire next; a fire delivered three times becomes one job that runs, owned
// by the schedule's owner and readable by them.
func TestScheduleFires(t *testing.T) {
	t.Parallel()
	resp, err := http.Get(stack.APIURL + localstack.SchedulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Schedules []localstack.ScheduleInfo `json:"schedules"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	var declared []localstack.ScheduleInfo
	for _, sc := range list.Schedules {
		if sc.Group == localstack.DeclaredGroup { // runtime ones come and go with the other tests
			declared = append(declared, sc)
		}
	}
	if err != nil || len(declared) != 1 {
		t.Fatalf("schedules %+v %v", list, err)
	}
	tick := declared[0]
	if tick.Name != "example.tick" || tick.Expression != "rate(1 minute)" || tick.Kind != "example.tick" ||
		tick.NextFire.Before(time.Now()) || tick.NextFire.After(time.Now().Add(61*time.Second)) {
		t.Fatalf("example.tick listed as %+v", tick)
	}
	at := time.Now().UTC().Truncate(time.Minute)
	for range 3 {
		if err := stack.FireSchedule(context.Background(), "example.tick", at); err != nil {
			t.Fatal(err)
		}
	}
	id := wire.FireJobID("example.tick", at)
	got, _ := waitFinal(t, "local", id, 30*time.Second)
	if got.Status != jobs.StatusSucceeded || got.Kind != "example.tick" || !strings.Contains(string(got.Result), `"note":"every minute"`) {
		t.Fatalf("the fire's job: %+v", got)
	}
	if a, _ := get(t, "mallory", id); a.status != http.StatusNotFound {
		t.Fatalf("another caller read the schedule's job: %d", a.status)
	}
}

// Runtime schedules over the local stack's API: created through the
// schedules function with its real Scheduler client (against the local
// Scheduler), listed only to their owner, fired into one job owned by
// the caller, and gone after DELETE.
func TestRuntimeSchedules(t *testing.T) {
	t.Parallel()
	body := `{"name":"nightly","expression":"cron(0 2 * * ? *)","time_zone":"Europe/Paris","kind":"example.hash","payload":{"text":"tick","rounds":1}}`
	a := call(t, "POST", "/v1/schedules", "sched-owner", "application/json", body)
	if a.status != 201 || a.header.Get("Location") != "/v1/schedules/nightly" || !strings.Contains(a.body, `"next_fire":"`) {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	// The same request again answers the same schedule: Scheduler has it
	// (CreateSchedule meets it; GetSchedule tells it is as asked).
	if a := call(t, "POST", "/v1/schedules", "sched-owner", "application/json", body); a.status != 201 {
		t.Fatalf("create again: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", "/v1/schedules", "sched-owner", "application/json", strings.Replace(body, "cron(0 2 * * ? *)", "cron(0 2 * * * *)", 1)); a.status != 400 {
		t.Fatalf("a bad expression: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", "/v1/schedules", "sched-owner", "", ""); a.status != 200 || !strings.Contains(a.body, `"name":"nightly"`) {
		t.Fatalf("list: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", "/v1/schedules", "sched-other", "", ""); a.status != 200 || a.body != `{"schedules":[]}` {
		t.Fatalf("another caller's list: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", "/v1/schedules/nightly", "sched-other", "", ""); a.status != 404 {
		t.Fatalf("another caller's read: %d %s", a.status, a.body)
	}
	// The local Scheduler has it, under the owner's key, in the runtime group.
	owner := "arn:aws:iam::" + localstack.LocalAccount + ":user/sched-owner"
	key := wire.OwnerKey(owner)
	var found bool
	for _, s := range stack.Scheduler.List() {
		if s.Group == localstack.RuntimeGroup && s.Name == wire.SchedulerName(key, "nightly") && s.Expression == "cron(0 2 * * ? *)" && s.TimeZone == "Europe/Paris" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the local Scheduler does not have it: %+v", stack.Scheduler.List())
	}
	at := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC) // 02:00 in Paris
	for range 2 {
		if err := stack.FireRuntimeSchedule(context.Background(), key, "nightly", at); err != nil {
			t.Fatal(err)
		}
	}
	id := wire.RuntimeFireJobID(key, "nightly", at)
	got, _ := waitFinal(t, "sched-owner", id, 30*time.Second)
	if got.Status != jobs.StatusSucceeded || got.Kind != "example.hash" {
		t.Fatalf("the fire's job: %+v", got)
	}
	if a, _ := get(t, "sched-other", id); a.status != 404 {
		t.Fatalf("another caller read the fire's job: %d", a.status)
	}
	if a := call(t, "DELETE", "/v1/schedules/nightly", "sched-other", "", ""); a.status != 404 {
		t.Fatalf("another caller's delete: %d %s", a.status, a.body)
	}
	if a := call(t, "DELETE", "/v1/schedules/nightly", "sched-owner", "", ""); a.status != 204 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	for _, s := range stack.Scheduler.List() {
		if s.Group == localstack.RuntimeGroup && s.Name == wire.SchedulerName(key, "nightly") {
			t.Fatal("the local Scheduler still has it")
		}
	}
	if a := call(t, "GET", "/v1/schedules/nightly", "sched-owner", "", ""); a.status != 404 {
		t.Fatalf("read after delete: %d", a.status)
	}
	// A Scheduler schedule under the name that no definition names (left
	// by a create whose answer was lost) is updated to the request's.
	left := wire.SchedulerName(key, "weekly")
	if err := leaveSchedule(left, "rate(7 days)"); err != nil {
		t.Fatal(err)
	}
	weekly := strings.Replace(body, `"nightly"`, `"weekly"`, 1)
	if a := call(t, "POST", "/v1/schedules", "sched-owner", "application/json", weekly); a.status != 201 {
		t.Fatalf("create over a schedule left behind: %d %s", a.status, a.body)
	}
	found = false
	for _, s := range stack.Scheduler.List() {
		if s.Group == localstack.RuntimeGroup && s.Name == left {
			found = s.Expression == "cron(0 2 * * ? *)" && s.TimeZone == "Europe/Paris"
		}
	}
	if !found {
		t.Fatalf("the schedule left behind was not updated: %+v", stack.Scheduler.List())
	}
	if a := call(t, "DELETE", "/v1/schedules/weekly", "sched-owner", "", ""); a.status != 204 {
		t.Fatalf("delete weekly: %d %s", a.status, a.body)
	}
}

// leaveSchedule creates a runtime-group schedule in the local Scheduler
// as the test harness (not a deployed principal: not recorded), with a
// target of its own.
func leaveSchedule(id, expression string) error {
	client := scheduler.New(scheduler.Options{Region: localaws.Region, BaseEndpoint: aws.String(stack.APIURL),
		Credentials: localaws.As(iamcalls.AccessKeyID(iamcalls.Harness))})
	api, err := schedulerapi.New(client, schedulerapi.Config{Group: localstack.RuntimeGroup, QueueARN: "arn:aws:sqs:us-east-1:000000000000:elsewhere",
		RoleARN: "arn:aws:iam::000000000000:role/elsewhere", DLQARN: "arn:aws:sqs:us-east-1:000000000000:elsewhere-dlq"})
	if err != nil {
		return err
	}
	return api.CreateSchedule(context.Background(), id, jobs.Schedule{Expression: expression, TimeZone: "UTC", Kind: "example.hash"}, `{"left":"behind"}`)
}

// Listing, retry and bulk over the local stack: a caller's failed job is
// listed among their failed jobs (never another caller's), retried from
// the API (it runs again), and a bulk cancel stops their delayed jobs.
func TestListRetryAndBulk(t *testing.T) {
	t.Parallel()
	failed := enqueue(t, "lister", "example.fail", `{"mode":"declared"}`)
	if got, _ := waitFinal(t, "lister", failed.ID, 30*time.Second); got.Status != jobs.StatusFailed {
		t.Fatalf("example.fail: %+v", got)
	}
	enqueue(t, "lister-other", "example.fail", `{"mode":"declared"}`)
	a := call(t, "GET", "/v1/jobs?status=failed&limit=10", "lister", "", "")
	var page struct {
		Jobs          []jobs.View `json:"jobs"`
		NextPageToken *string     `json:"next_page_token"`
	}
	if err := json.Unmarshal([]byte(a.body), &page); a.status != 200 || err != nil || len(page.Jobs) != 1 || page.Jobs[0].ID != failed.ID || page.NextPageToken != nil {
		t.Fatalf("failed jobs: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", "/v1/jobs?status=done", "lister", "", ""); a.status != 400 {
		t.Fatalf("a bad status: %d", a.status)
	}
	if a := call(t, "POST", "/v1/jobs/"+failed.ID+"/retry", "lister-other", "", ""); a.status != 404 {
		t.Fatalf("another caller's retry: %d", a.status)
	}
	// The retry's message may reach a worker before the answer reads the
	// job back: queued, or already running its second attempt.
	if a := call(t, "POST", "/v1/jobs/"+failed.ID+"/retry", "lister", "", ""); a.status != 200 || !strings.Contains(a.body, `"status":"queued"`) && !strings.Contains(a.body, `"attempt":2`) {
		t.Fatalf("retry: %d %s", a.status, a.body)
	}
	got, _ := waitFinal(t, "lister", failed.ID, 30*time.Second)
	if got.Status != jobs.StatusFailed || got.Attempt != 2 {
		t.Fatalf("the retried job ran again: %+v", got)
	}
	// The local operator reads and acts on the lister's jobs through the
	// admin routes; the lister cannot use them.
	lister := "arn:aws:iam::" + localstack.LocalAccount + ":user/lister"
	if a := call(t, "GET", "/v1/admin/jobs?status=failed&owner="+url.QueryEscape(lister), "operator", "", ""); a.status != 200 || !strings.Contains(a.body, failed.ID) {
		t.Fatalf("the operator's listing: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", "/v1/admin/jobs/"+failed.ID, "operator", "", ""); a.status != 200 || !strings.Contains(a.body, `"owner":"`+lister+`"`) {
		t.Fatalf("the operator's read: %d %s", a.status, a.body)
	}
	if a := call(t, "GET", "/v1/admin/jobs/"+failed.ID, "lister", "", ""); a.status != 403 {
		t.Fatalf("a non-operator on the admin routes: %d %s", a.status, a.body)
	}
	var delayed []string
	for range 3 {
		a := call(t, "POST", "/v1/jobs", "lister", "application/json", `{"kind":"example.hash","payload":{"text":"later","rounds":1},"delay":3600}`)
		var v jobs.View
		_ = json.Unmarshal([]byte(a.body), &v)
		delayed = append(delayed, v.ID)
	}
	a = call(t, "POST", "/v1/bulk/cancel", "lister", "application/json", `{"status":"queued","kind":"example.hash"}`)
	if a.status != 200 || !strings.Contains(a.body, `"matched":3,"changed":3`) {
		t.Fatalf("bulk cancel: %d %s", a.status, a.body)
	}
	for _, id := range delayed {
		if _, v := get(t, "lister", id); v.Status != jobs.StatusCancelled {
			t.Fatalf("%s after the bulk cancel: %s", id, v.Status)
		}
	}
}

func TestHashJobSucceeds(t *testing.T) {
	t.Parallel()
	v := enqueue(t, "alice", "example.hash", `{"text":"hello","rounds":1}`)
	got, _ := waitFinal(t, "alice", v.ID, 20*time.Second)
	if got.Status != jobs.StatusSucceeded || string(got.Result) != `{"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}` {
		t.Fatalf("got %+v %s", got, got.Result)
	}
}

func TestPartialResultsAreVisibleWhileRunning(t *testing.T) {
	t.Parallel()
	v := enqueue(t, "alice", "example.sleep", `{"ms":1500,"steps":3}`)
	got, seen := waitFinal(t, "alice", v.ID, 20*time.Second)
	if string(got.Result) != `{"done":3,"total":3}` {
		t.Fatalf("final result %s", got.Result)
	}
	partial := false
	for _, a := range seen {
		if strings.Contains(a.body, `"status":"running"`) && strings.Contains(a.body, `"result":{"done":`) {
			partial = true
		}
	}
	if !partial {
		t.Fatalf("no partial result seen while running in %d polls", len(seen))
	}
}

func TestFailuresAreCodesAndSecretsLeakNowhere(t *testing.T) {
	t.Parallel()
	modes := map[string]string{
		"declared":        "example_failed",
		"internal":        jobs.CodeInternal,
		"panic":           jobs.CodeInternal,
		"ignore_deadline": jobs.CodeTimedOut,
	}
	secrets := map[string]string{}
	var answers []string
	for mode := range modes {
		secret := "e2e-secret-" + mode + "-" + wire.NewID()[:8]
		secrets[mode] = secret
		v := enqueue(t, "carol", "example.fail", `{"mode":"`+mode+`","secret":"`+secret+`"}`)
		got, seen := waitFinal(t, "carol", v.ID, 30*time.Second)
		if got.Status != jobs.StatusFailed || got.Error == nil || *got.Error != modes[mode] {
			t.Fatalf("mode %s: %+v", mode, got)
		}
		for _, a := range seen {
			answers = append(answers, a.body)
		}
	}
	items := scanTable(t)
	for mode, secret := range secrets {
		for what, text := range map[string]string{"API answers": strings.Join(answers, "\n"), "logs": logs.String(), "DynamoDB items": items} {
			if strings.Contains(text, secret) {
				t.Errorf("mode %s: the secret appears in the %s", mode, what)
			}
		}
	}
	if !strings.Contains(items, `"$sealed"`) {
		t.Fatal("the scan found no sealed payload: did it read the table?")
	}
}

func TestOwnerIsolation(t *testing.T) {
	t.Parallel()
	v := enqueue(t, "alice", "example.hash", `{"text":"mine","rounds":1}`)
	theirs, _ := get(t, "bob", v.ID)
	unknown, _ := get(t, "bob", wire.NewID())
	if theirs.status != 404 || unknown.status != 404 || theirs.body != unknown.body {
		t.Fatalf("another owner's job: %d %s; unknown: %d %s", theirs.status, theirs.body, unknown.status, unknown.body)
	}
	if mine, _ := get(t, "alice", v.ID); mine.status != 200 {
		t.Fatalf("owner: %d", mine.status)
	}
}

func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, body string
		status                  int
		code                    string
	}{
		{"not JSON", "application/json", `{"kind":`, 400, "malformed_json"},
		{"wrong media type", "text/plain", `{"kind":"example.hash","payload":{}}`, 415, "unsupported_media_type"},
		{"unknown kind", "application/json", `{"kind":"nope","payload":{}}`, 422, "unknown_kind"},
		{"unknown payload field", "application/json", `{"kind":"example.hash","payload":{"text":"a","rounds":1,"x":1}}`, 422, "invalid_payload"},
		// A route-fed kind is internal: no caller hands it an S3 record.
		{"internal kind", "application/json", `{"kind":"example.s3_object","payload":{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}}`, 422, "unknown_kind"},
		// Tenants and lanes are the trusted callers' (the default local caller's).
		{"tenant", "application/json", `{"kind":"example.hash","payload":{"text":"a","rounds":1},"tenant":"someone"}`, 403, "forbidden"},
		{"lane", "application/json", `{"kind":"example.hash","payload":{"text":"a","rounds":1},"lane":"urgent"}`, 403, "forbidden"},
	}
	for _, tt := range tests {
		a := call(t, "POST", "/v1/jobs", "dave", tt.contentType, tt.body)
		if a.status != tt.status || a.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(a.body, `"code":"`+tt.code+`"`) {
			t.Errorf("%s: %d %s %s", tt.name, a.status, a.header.Get("Content-Type"), a.body)
		}
	}
	if a := call(t, "GET", "/v1/nothing", "dave", "", ""); a.status != 404 {
		t.Errorf("unknown route: %d", a.status)
	}
	if a := call(t, "POST", "/v1/jobs", "", "application/json", `{"kind":"example.hash","payload":{"text":"a","rounds":1},"tenant":"customer-7"}`); a.status != 202 {
		t.Errorf("the trusted local caller's tenant: %d %s", a.status, a.body)
	}
}

// scanTable returns every item of the table as text (a test may Scan).
func scanTable(t *testing.T) string {
	t.Helper()
	client := localaws.DynamoDBClient(stack.DynamoDBEndpoint)
	out, err := client.Scan(context.Background(), &dynamodb.ScanInput{TableName: &stack.Table})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var walk func(types.AttributeValue)
	walk = func(av types.AttributeValue) {
		switch v := av.(type) {
		case *types.AttributeValueMemberS:
			b.WriteString(v.Value + "\n")
		case *types.AttributeValueMemberN:
			b.WriteString(v.Value + "\n")
		case *types.AttributeValueMemberB:
			b.Write(v.Value)
		case *types.AttributeValueMemberM:
			for k, e := range v.Value {
				b.WriteString(k + "\n")
				walk(e)
			}
		case *types.AttributeValueMemberL:
			for _, e := range v.Value {
				walk(e)
			}
		}
	}
	for _, it := range out.Items {
		walk(&types.AttributeValueMemberM{Value: it})
	}
	return b.String()
}

func TestDelayAndCancel(t *testing.T) {
	t.Parallel()
	// A delayed job waits, then runs.
	a := call(t, "POST", "/v1/jobs", "erin", "application/json", `{"kind":"example.hash","payload":{"text":"later","rounds":1},"delay":2}`)
	if a.status != 202 || !strings.Contains(a.body, `"run_at":"`) {
		t.Fatalf("delayed POST: %d %s", a.status, a.body)
	}
	var delayed jobs.View
	_ = json.Unmarshal([]byte(a.body), &delayed)
	if _, v := get(t, "erin", delayed.ID); v.Status != jobs.StatusQueued {
		t.Fatalf("delayed job %s before its time", v.Status)
	}
	if got, _ := waitFinal(t, "erin", delayed.ID, 20*time.Second); got.Status != jobs.StatusSucceeded || got.FinishedAt.Sub(got.CreatedAt) < 2*time.Second {
		code := ""
		if got.Error != nil {
			code = *got.Error
		}
		t.Fatalf("delayed job: %s %q, %+v", got.Status, code, got)
	}

	// A queued (delayed) job is cancelled at once.
	a = call(t, "POST", "/v1/jobs", "erin", "application/json", `{"kind":"example.hash","payload":{"text":"never","rounds":1},"delay":60}`)
	var later jobs.View
	_ = json.Unmarshal([]byte(a.body), &later)
	if c := call(t, "POST", "/v1/jobs/"+later.ID+"/cancel", "erin", "", ""); c.status != 200 || !strings.Contains(c.body, `"status":"cancelled"`) {
		t.Fatalf("cancel queued: %d %s", c.status, c.body)
	}
	// Another caller cannot cancel; a finished job answers 409.
	if c := call(t, "POST", "/v1/jobs/"+later.ID+"/cancel", "mallory", "", ""); c.status != 404 {
		t.Fatalf("another caller's cancel: %d", c.status)
	}
	if c := call(t, "POST", "/v1/jobs/"+later.ID+"/cancel", "erin", "", ""); c.status != 409 || !strings.Contains(c.body, `"code":"already_finished"`) {
		t.Fatalf("cancel finished: %d %s", c.status, c.body)
	}

	// A running job: 202, then it ends cancelled well before it would have finished.
	r := enqueue(t, "erin", "example.sleep", `{"ms":4000,"steps":40}`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, v := get(t, "erin", r.ID); v.Status == jobs.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sleep job never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := call(t, "POST", "/v1/jobs/"+r.ID+"/cancel", "erin", "", "")
	if c.status != 202 || !strings.Contains(c.body, `"cancel_requested":true`) {
		t.Fatalf("cancel running: %d %s", c.status, c.body)
	}
	got, _ := waitFinal(t, "erin", r.ID, 10*time.Second)
	if got.Status != jobs.StatusCancelled || got.FinishedAt.Sub(*got.StartedAt) > 3*time.Second {
		t.Fatalf("cancelled running job %+v", got)
	}
}

func TestRetriesOnTheLocalStack(t *testing.T) {
	t.Parallel()
	ok := enqueue(t, "frank", "example.flaky", `{"fail_times":2}`)
	exhausted := enqueue(t, "frank", "example.flaky", `{"fail_times":9}`)
	sawRetry := false
	deadline := time.Now().Add(40 * time.Second)
	for {
		_, a := get(t, "frank", ok.ID)
		_, b := get(t, "frank", exhausted.ID)
		if a.Status == jobs.StatusQueued && a.RunAt != nil && a.LastError != nil && *a.LastError == "still_failing" {
			sawRetry = true
		}
		if a.Status.Final() && b.Status.Final() {
			if a.Status != jobs.StatusSucceeded || a.Attempt != 3 || string(a.Result) != `{"succeeded_on_attempt":3}` {
				t.Fatalf("retried job %+v %s", a, a.Result)
			}
			if b.Status != jobs.StatusFailed || *b.Error != "still_failing" || b.Attempt != 4 {
				t.Fatalf("exhausted job %+v", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled: %+v %+v", a, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !sawRetry {
		t.Fatal("never saw the job waiting for a retry with run_at and last_error")
	}
}

func TestBatchOverHTTP(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range 20 {
		lines = append(lines, fmt.Sprintf(`{"kind":"example.hash","payload":{"text":"%d","rounds":1}}`, i))
	}
	lines[5] = `{"kind":"example.fail","payload":{"mode":"declared","secret":"s"}}`
	body := `{"jobs":[` + strings.Join(lines, ",") + `],"completion":{"kind":"example.hash","payload":{"text":"all done","rounds":1}}}`
	a := call(t, "POST", "/v1/batches", "grace", "application/json", body)
	if a.status != 202 || !strings.HasPrefix(a.header.Get("Location"), "/v1/batches/") {
		t.Fatalf("POST /v1/batches: %d %s", a.status, a.body)
	}
	var b jobs.Batch
	_ = json.Unmarshal([]byte(a.body), &b)
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := call(t, "GET", "/v1/batches/"+b.ID, "grace", "", "")
		_ = json.Unmarshal([]byte(g.body), &b)
		if b.Status != jobs.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch still running: %s", g.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if b.Status != jobs.StatusFailed || b.Counts.Succeeded != 19 || b.Counts.Failed != 1 || b.Counts.Pending != 0 || b.CompletionJobID == nil {
		t.Fatalf("batch %+v", b)
	}
	if got, _ := waitFinal(t, "grace", *b.CompletionJobID, 20*time.Second); got.Status != jobs.StatusSucceeded {
		t.Fatalf("completion job %+v", got)
	}
	if other := call(t, "GET", "/v1/batches/"+b.ID, "mallory", "", ""); other.status != 404 {
		t.Fatalf("another caller: %d", other.status)
	}
}

// A handler starts children on the local stack, through the worker's own
// grants: example.fanout starts 50 example.hash jobs for its caller, each
// naming its parent, and each runs.
func TestAHandlerStartsChildren(t *testing.T) {
	t.Parallel()
	const caller = "fanner"
	parent := enqueue(t, caller, "example.fanout", `{"accounts":50}`)
	got, _ := waitFinal(t, caller, parent.ID, 60*time.Second)
	var r examplekinds.FanOutResult
	if got.Status != jobs.StatusSucceeded || json.Unmarshal(got.Result, &r) != nil {
		t.Fatalf("example.fanout: %+v", got)
	}
	// A run the stack's load interrupts (a store or queue fault is a
	// retry) starts the rest on its next attempt and finds the ones it
	// started: the last run's counts add up to 50 either way, and a first
	// run found none.
	if r.Started+r.Found != 50 || (got.Attempt == 1 && r.Found != 0) {
		t.Fatalf("example.fanout on attempt %d: %s", got.Attempt, got.Result)
	}
	var page struct {
		Jobs []jobs.View `json:"jobs"`
	}
	a := call(t, "GET", "/v1/jobs?kind=example.hash&limit=100", caller, "", "")
	if err := json.Unmarshal([]byte(a.body), &page); a.status != 200 || err != nil || len(page.Jobs) != 50 {
		t.Fatalf("the children: %d %s", a.status, a.body)
	}
	for _, c := range page.Jobs {
		if c.ChildOf != parent.ID {
			t.Fatalf("child %s names parent %q, want %s", c.ID, c.ChildOf, parent.ID)
		}
		if got, _ := waitFinal(t, caller, c.ID, 60*time.Second); got.Status != jobs.StatusSucceeded {
			t.Fatalf("child %s: %+v", c.ID, got)
		}
	}
}

// TestAHandlerWaitsForItsChildren: on the local stack, example.chain
// waits for one example.hash child per text, in turn (jobs.Invoke): it
// waits queued on each (waiting_on child), each child's end wakes it, and
// its result chains their digests; its steps show each child done.
func TestAHandlerWaitsForItsChildren(t *testing.T) {
	t.Parallel()
	const caller = "chainer"
	parent := enqueue(t, caller, examplekinds.Chain, `{"texts":["a","b","c"],"rounds":1000000}`)
	sawWait := false
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, v := get(t, caller, parent.ID)
		if v.WaitingOn == "child" {
			sawWait = true
		}
		if v.Status.Final() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("example.chain never ended: %+v", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	got, _ := waitFinal(t, caller, parent.ID, time.Second)
	var r examplekinds.ChainResult
	if got.Status != jobs.StatusSucceeded || json.Unmarshal(got.Result, &r) != nil || len(r.Digests) != 3 {
		t.Fatalf("example.chain: %+v (%s)", got, got.Result)
	}
	if !sawWait {
		t.Error("example.chain was never seen waiting on its child")
	}
	if len(got.Steps) != 3 || got.Steps[2].Kind != "child" || got.Steps[2].Status != "done" {
		t.Fatalf("example.chain's steps: %+v", got.Steps)
	}
	a := call(t, "GET", "/v1/jobs?kind=example.hash&limit=10", caller, "", "")
	var page struct {
		Jobs []jobs.View `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(a.body), &page); a.status != 200 || err != nil || len(page.Jobs) != 3 {
		t.Fatalf("the children: %d %s", a.status, a.body)
	}
	for _, c := range page.Jobs {
		if c.ChildOf != parent.ID || c.Status != jobs.StatusSucceeded {
			t.Fatalf("child %+v", c)
		}
	}
}

// TestAHandlerMapsOverAThousandChildren: on the local stack,
// example.nightly maps example.hash over 1,000 accounts, 500 at a time
// (jobs.Map): two waves, each a batch, and the parent is woken once per
// wave, so its handler runs three times (the stats count its runs), not
// 1,000; every child succeeds once and the digest of their digests comes
// back.
func TestAHandlerMapsOverAThousandChildren(t *testing.T) {
	t.Parallel()
	const caller = "nightly"
	parent := enqueue(t, caller, examplekinds.Nightly, `{"accounts":1000,"window":500}`)
	got, _ := waitFinal(t, caller, parent.ID, 5*time.Minute)
	var r examplekinds.NightlyResult
	if got.Status != jobs.StatusSucceeded || json.Unmarshal(got.Result, &r) != nil || r.Succeeded != 1000 || r.Failed != 0 {
		t.Fatalf("example.nightly: %+v (%s)", got, got.Result)
	}
	sum := sha256.New()
	for i := range 1000 {
		d := sha256.Sum256([]byte(fmt.Sprint("account-", i)))
		sum.Write([]byte(hex.EncodeToString(d[:])))
	}
	if want := hex.EncodeToString(sum.Sum(nil)); r.Digest != want {
		t.Fatalf("example.nightly's digest %s, want %s", r.Digest, want)
	}
	if len(got.Steps) != 1 || got.Steps[0].Kind != "children" || got.Steps[0].Status != "done" {
		t.Fatalf("example.nightly's steps: %+v", got.Steps)
	}
	waitKindStats(t, examplekinds.Nightly, "example.nightly did not run 3 times (one per wave and one more)", func(k localstack.KindStats) bool {
		return k.Durations["RunDuration"].N == 3
	})
}

// TestLargePayloadsAndResults: on the local stack, a 300 KB payload comes
// through POST /v1/jobs, rests in the bucket with its secret sealed, and
// reaches the handler whole; the handler's 20 MB result is written in
// parts and read back by the caller through the link GET gives. A payload
// past a kind's bound, or past what POST takes, is a 413 and stores
// nothing.
func TestLargePayloadsAndResults(t *testing.T) {
	t.Parallel()
	const caller = "blobber"
	noise := make([]byte, 150<<10) // hex of random bytes: 300 KB that stays about 150 KB compressed
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	data := hex.EncodeToString(noise)
	const secret = "tok-3b1c9e7d5a"
	resultBytes := 20 << 20
	v := enqueue(t, caller, examplekinds.Blob, fmt.Sprintf(`{"data":%q,"result_bytes":%d,"token":%q}`, data, resultBytes, secret))
	got, _ := waitFinal(t, caller, v.ID, 60*time.Second)
	if got.Status != jobs.StatusSucceeded {
		code := ""
		if got.Error != nil {
			code = *got.Error
		}
		t.Fatalf("example.blob: %s %q: %+v", got.Status, code, got)
	}
	a, view := get(t, caller, v.ID)
	if view.PayloadBytes < len(data) || string(view.Payload) != "null" || view.ResultBytes < resultBytes || string(view.Result) != "null" || view.ResultURL == "" {
		t.Fatalf("GET of a job with large parts: %.400s", a.body)
	}
	resp, err := http.Get(view.ResultURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r examplekinds.BlobResult
	if err := json.Unmarshal(body, &r); err != nil || resp.StatusCode != 200 || len(body) != view.ResultBytes {
		t.Fatalf("the result's link: %d, %d bytes (%v), want %d", resp.StatusCode, len(body), err, view.ResultBytes)
	}
	sum := sha256.Sum256([]byte(data))
	if r.Bytes != len(data) || r.SHA256 != hex.EncodeToString(sum[:]) || len(r.Fill) != resultBytes {
		t.Fatalf("the handler read %d bytes (%s), want %d (%x); fill %d", r.Bytes, r.SHA256, len(data), sum, len(r.Fill))
	}
	// The payload's object, read raw: the secret is sealed in it.
	s3c := localaws.S3Client(stack.SQSEndpoint)
	list, err := s3c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &stack.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	var payloadKey string
	for _, o := range list.Contents {
		if strings.Contains(*o.Key, "/"+v.ID+"/payload-") {
			payloadKey = *o.Key
		}
	}
	if payloadKey == "" {
		t.Fatalf("no payload object of %s in %s", v.ID, stack.Bucket)
	}
	obj, err := s3c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &stack.Bucket, Key: &payloadKey})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if bytes.Contains(raw, []byte(secret)) || !bytes.Contains(raw, []byte(data[:64])) {
		t.Fatalf("the payload's object holds the secret in the clear, or not the payload (%d bytes)", len(raw))
	}

	for _, tc := range []struct{ kind, payload string }{
		{examplekinds.Hash, fmt.Sprintf(`{"text":%q}`, strings.Repeat("a", 130<<10))},  // past example.hash's 128 KiB
		{examplekinds.Blob, fmt.Sprintf(`{"data":%q}`, strings.Repeat("a", 2<<20+10))}, // past what POST takes
	} {
		a := call(t, "POST", "/v1/jobs", caller, "application/json", `{"kind":"`+tc.kind+`","payload":`+tc.payload+`}`)
		if a.status != http.StatusRequestEntityTooLarge || !strings.Contains(a.body, `"too_large"`) {
			t.Fatalf("POST %s of %d bytes: %d %.300s, want 413 too_large", tc.kind, len(tc.payload), a.status, a.body)
		}
	}
	var page struct {
		Jobs []jobs.View `json:"jobs"`
	}
	if a := call(t, "GET", "/v1/jobs?limit=100", caller, "", ""); json.Unmarshal([]byte(a.body), &page) != nil || len(page.Jobs) != 1 {
		t.Fatalf("the caller's jobs after the refusals: %.300s, want the one accepted", a.body)
	}
}

// TestAHandlerWaitsForASignal: on the local stack, example.approve waits
// for its signal holding no worker (waiting_on signal, no attempt spent);
// POST /v1/jobs/{id}/signals/approval stores it and wakes the job, which
// ends with the signal's payload; the same signal again is a duplicate,
// and one of a name the kind does not declare stores nothing.
func TestAHandlerWaitsForASignal(t *testing.T) {
	t.Parallel()
	const caller = "approver"
	v := enqueue(t, caller, examplekinds.Approve, `{"item":"invoice-7","hours":2}`)
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, got := get(t, caller, v.ID)
		if got.WaitingOn == "signal" && got.Signal == "approval" && got.Status == jobs.StatusQueued && got.Attempt == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("example.approve never waited for its signal: %+v", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
	path := "/v1/jobs/" + v.ID + "/signals/"
	if a := call(t, "POST", path+"approvals", caller, "application/json", `{"approved":true}`); a.status != 422 {
		t.Fatalf("an undeclared signal: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", path+"approval", caller, "application/json", `{"approved":true,"by":"ana"}`); a.status != 202 || a.body != `{"duplicate":false,"woke":true}` {
		t.Fatalf("the signal: %d %s", a.status, a.body)
	}
	if a := call(t, "POST", path+"approval", caller, "application/json", `{"approved":false,"by":"bob"}`); a.status != 200 || a.body != `{"duplicate":true,"woke":false}` {
		t.Fatalf("the signal again: %d %s", a.status, a.body)
	}
	got, _ := waitFinal(t, caller, v.ID, 60*time.Second)
	if got.Status != jobs.StatusSucceeded || string(got.Result) != `{"item":"invoice-7","approved":true,"by":"ana"}` || got.Attempt != 1 {
		t.Fatalf("after the signal: %+v (result %s)", got, got.Result)
	}
}

// TestACallbackTokenNeverShows: on the local stack, example.order asks
// its provider (a server of this test's) to ship with a callback token
// and waits; the provider, with no caller identity, answers through POST
// /v1/callbacks/{token}, which wakes the order; the token then answers
// 409 token_used, an altered one 401. The token appears in no output of
// the stack (the gateway's, the functions', the emulators'), in no API
// answer and in no item of the table.
func TestACallbackTokenNeverShows(t *testing.T) {
	t.Parallel()
	const caller = "shop"
	provider := examplekinds.NewOrderProvider()
	srv := httptest.NewServer(provider)
	defer srv.Close()
	v := enqueue(t, caller, examplekinds.Order, `{"order":"o-77","amount_cents":1200,"provider":"`+srv.URL+`","ship_wait_minutes":30,"review_after_seconds":1}`)
	var token string
	select {
	case call := <-provider.Shipping:
		token = call.CallbackToken
	case <-time.After(60 * time.Second):
		t.Fatal("the provider was never asked to ship")
	}
	var answers []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		a, got := get(t, caller, v.ID)
		answers = append(answers, a.body)
		if got.WaitingOn == "signal" && got.Signal == "shipped" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("example.order never waited for its shipping: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	altered := []byte(token)
	altered[len(altered)/2] ^= 1
	for _, c := range []struct {
		token  string
		status int
	}{{string(altered), 401}, {token, 202}, {token, 409}} {
		a := call(t, "POST", "/v1/callbacks/"+c.token, "", "application/json", `{"tracking":"1Z-77"}`)
		answers = append(answers, a.body)
		if a.status != c.status {
			t.Fatalf("a callback: %d %s, want %d", a.status, a.body, c.status)
		}
	}
	got, seen := waitFinal(t, caller, v.ID, 60*time.Second)
	if got.Status != jobs.StatusSucceeded || string(got.Result) != `{"order":"o-77","charge":"ch-o-77","tracking":"1Z-77","reviewed":true}` {
		t.Fatalf("the order: %+v (%s)", got, got.Result)
	}
	for _, a := range seen {
		answers = append(answers, a.body)
	}
	for what, text := range map[string]string{"API answers": strings.Join(answers, "\n"), "stack's output": logs.String(), "DynamoDB items": scanTable(t)} {
		if strings.Contains(text, token) || strings.Contains(text, token[len(token)/2:]) {
			t.Errorf("the callback token appears in the %s", what)
		}
	}
}
