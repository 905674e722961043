package localstack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/localstack"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Where TestMain built the bootstraps, for tests that start a stack of
// their own.
var e2eRoot, e2eBootstraps, e2eRIE string

// With JOBS_EVENTS=all, a job run by the real bootstraps reaches the local
// bus through the SDK's PutEvents (AWS_ENDPOINT_URL_EVENTBRIDGE), once,
// with its stable id: what `make run` shows. Its own stack, so the shared
// one's kinds keep paying nothing for events.
func TestJobEventsReachTheLocalBus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := &syncBuffer{}
	s, err := localstack.Start(ctx, localstack.Config{
		Root: e2eRoot, Bootstraps: e2eBootstraps, RIE: e2eRIE,
		APIAddr: "127.0.0.1:0", Table: "e2e-events", Queue: "e2e-events",
		WorkerTimeout: 8 * time.Second, APITimeout: 10 * time.Second, WorkerInstances: 1, BatchSize: 5,
		NoSchedules: true, FunctionEnv: []string{"JOBS_EVENTS=all"}, Output: out,
	})
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out.String())
	}
	defer s.Stop()
	req, _ := http.NewRequest(http.MethodPost, s.APIURL+"/v1/jobs", strings.NewReader(`{"kind":"example.hash","payload":{"text":"hello","rounds":1}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Local-Caller", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var v jobs.View
	_ = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || v.ID == "" {
		t.Fatalf("enqueue: %d %+v", resp.StatusCode, v)
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		if len(s.Events.Events()) > 0 || time.Now().After(deadline) {
			break
		}
	}
	evs := s.Events.Events()
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
}
