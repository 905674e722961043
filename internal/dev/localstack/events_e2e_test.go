package localstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Where TestMain built the bootstraps, for tests that start a stack of
// their own.
var e2eRoot, e2eBootstraps, e2eRIE string

// With JOBS_EVENTS=all, a job run by the real bootstraps reaches the local
// bus through the SDK's PutEvents (AWS_ENDPOINT_URL_EVENTBRIDGE), once,
// with its stable id: what `make run` shows. Its own stack, so the shared
// one's kinds keep paying nothing for events. The stack's webhook target
// gets each outcome's event once: that job's, and a cancelled, retried
// and succeeded job's two.
func TestJobEventsReachTheLocalBus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := &hook{statuses: []int{http.StatusOK}}
	s, out := testenv.StartStack(t, ctx, localstack.Config{
		Root: e2eRoot, Bootstraps: e2eBootstraps, RIE: e2eRIE,
		APIAddr: "127.0.0.1:0", Table: "e2e-events", Queue: "e2e-events",
		WorkerTimeout: 8 * time.Second, APITimeout: 10 * time.Second, WorkerInstances: 1, BatchSize: 5,
		NoSchedules: true, FunctionEnv: []string{"JOBS_EVENTS=all"}, Webhook: serveHook(t, h).String(),
	})
	send := func(method, path, body string) jobs.View {
		t.Helper()
		req, _ := http.NewRequest(method, s.APIURL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Local-Caller", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v jobs.View
		_ = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode >= 300 || v.ID == "" {
			t.Fatalf("%s %s: %d %+v", method, path, resp.StatusCode, v)
		}
		return v
	}
	v := send(http.MethodPost, "/v1/jobs", `{"kind":"example.hash","payload":{"text":"hello","rounds":1}}`)
	waitEvents := func(n int) []localstack.BusEvent {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if len(s.Events.Events()) >= n || time.Now().After(deadline) {
				break
			}
		}
		return s.Events.Events()
	}
	evs := waitEvents(1)
	if len(evs) != 1 {
		t.Fatalf("%d events on the local bus, want 1\n%s", len(evs), out.String())
	}
	var ev jobs.Event
	if err := json.Unmarshal(evs[0].Detail, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.ID != v.ID+"/1" || ev.Status != jobs.StatusSucceeded || ev.Kind != "example.hash" || evs[0].DetailType != jobs.EventDetailType ||
		string(ev.Result) != `{"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}` {
		t.Fatalf("event %+v (%s)", ev, evs[0].Detail)
	}

	// A job held an hour, cancelled, retried: two outcomes, two events.
	held := send(http.MethodPost, "/v1/jobs", `{"kind":"example.hash","payload":{"text":"later","rounds":1},"delay":3600}`)
	send(http.MethodPost, "/v1/jobs/"+held.ID+"/cancel", "")
	send(http.MethodPost, "/v1/jobs/"+held.ID+"/retry", "")
	if evs := waitEvents(3); len(evs) != 3 {
		t.Fatalf("%d events on the local bus, want 3\n%s", len(evs), out.String())
	}
	st := waitStats(t, s.Webhook, func(st localstack.WebhookStats) bool { return st.Delivered+st.Failed == 3 })
	got := map[string]int{}
	for _, r := range h.requests() {
		got[r.header.Get("Idempotency-Key")]++
	}
	if want := map[string]int{v.ID + "/1": 1, held.ID + "/1": 1, held.ID + "/2": 1}; st.Delivered != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the webhook got %v (%+v), want each outcome once: %v", got, st, want)
	}
}
