package localstack_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
)

// An operator pauses the declared schedule example.tick on the local
// stack: two fires make no job; "run now" makes exactly one job, marked
// as run by hand, and a second call with the same Idempotency-Key
// returns it; after the resume a fire makes its job. Not parallel: the
// pause would skip TestScheduleFires's fire.
func TestPausedScheduleAndRunNow(t *testing.T) {
	ctx := context.Background()
	post := func(path, key string, want int) answer {
		t.Helper()
		req, err := http.NewRequest("POST", stack.APIURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Local-Caller", "operator")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		a := send(t, req)
		if a.status != want {
			t.Fatalf("POST %s: %d %s, want %d", path, a.status, a.body, want)
		}
		return a
	}
	post("/v1/admin/schedules/example.tick/pause", "", http.StatusCreated)
	resumed := false
	defer func() {
		if !resumed {
			post("/v1/admin/schedules/example.tick/resume", "", http.StatusNoContent)
		}
	}()
	time.Sleep(6 * time.Second) // every instance's copy of the pause set is newer than the pause
	base := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 2 {
		if err := stack.FireSchedule(ctx, "example.tick", base.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	var first, second jobs.View
	a := post("/v1/admin/schedules/example.tick/run", "manual-1", http.StatusAccepted)
	if err := json.Unmarshal([]byte(a.body), &first); err != nil || first.ManualRunOf != "example.tick" {
		t.Fatalf("run now: %s", a.body)
	}
	b := post("/v1/admin/schedules/example.tick/run", "manual-1", http.StatusAccepted)
	if err := json.Unmarshal([]byte(b.body), &second); err != nil || second.ID != first.ID || b.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("run now again with the key: %s, want job %s replayed", b.body, first.ID)
	}
	adminGet := func(id string) (int, jobs.View) {
		req, _ := http.NewRequest("GET", stack.APIURL+"/v1/admin/jobs/"+id, nil)
		req.Header.Set("X-Local-Caller", "operator")
		a := send(t, req)
		var v httpapi.AdminJob
		_ = json.Unmarshal([]byte(a.body), &v)
		return a.status, v.Job
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, v := adminGet(first.ID)
		if v.Status == jobs.StatusSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the manual run's job did not succeed within 30 s: %d %+v", status, v)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // the fires, sent before the run, are handled by now
	for i := range 2 {
		id := wire.FireJobID("example.tick", base.Add(time.Duration(i)*time.Minute))
		if status, v := adminGet(id); status != http.StatusNotFound {
			t.Fatalf("a fire of the paused schedule made job %s (%s)", id, v.Status)
		}
	}
	post("/v1/admin/schedules/example.tick/resume", "", http.StatusNoContent)
	resumed = true
	time.Sleep(6 * time.Second)
	at := base.Add(time.Hour)
	if err := stack.FireSchedule(ctx, "example.tick", at); err != nil {
		t.Fatal(err)
	}
	id := wire.FireJobID("example.tick", at)
	deadline = time.Now().Add(30 * time.Second)
	for {
		if status, v := adminGet(id); status == http.StatusOK && v.Status.Final() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fire after the resume made no job within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// send sends req and reads its answer.
func send(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}
