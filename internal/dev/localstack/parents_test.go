package localstack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// enqueueAfter enqueues a job of kind that runs after the jobs after.
func enqueueAfter(t *testing.T, caller, kind, payload string, after ...string) jobs.View {
	t.Helper()
	ids, _ := json.Marshal(after)
	a := call(t, "POST", "/v1/jobs", caller, "application/json", fmt.Sprintf(`{"kind":%q,"payload":%s,"after":%s}`, kind, payload, ids))
	if a.status != 202 {
		t.Fatalf("POST %s after %v: %d %s", kind, after, a.status, a.body)
	}
	var v jobs.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Jobs that run after jobs, through the real bootstraps: a chain runs in
// order, a failure cancels what follows it, a fan-in of 50 parents runs its
// child once after the last, and a replay makes a new job.
func TestDependenciesOnTheLocalStack(t *testing.T) {
	t.Parallel()
	const caller = "deps"
	wait := func(id string) jobs.View {
		t.Helper()
		v, _ := waitFinal(t, caller, id, 60*time.Second)
		return v
	}

	t.Run("a chain runs in order", func(t *testing.T) {
		a := enqueueAfter(t, caller, "example.sleep", `{"ms":300,"steps":1}`)
		b := enqueueAfter(t, caller, "example.hash", `{"text":"b","rounds":1}`, a.ID)
		c := enqueueAfter(t, caller, "example.hash", `{"text":"c","rounds":1}`, b.ID)
		if c.WaitingOn != "parents" || c.ParentsLeft != 1 {
			t.Fatalf("c as enqueued: waiting on %q, %d left", c.WaitingOn, c.ParentsLeft)
		}
		vc := wait(c.ID)
		_, va := get(t, caller, a.ID)
		_, vb := get(t, caller, b.ID)
		for _, v := range []jobs.View{va, vb, vc} {
			if v.Status != jobs.StatusSucceeded || v.Attempt != 1 {
				t.Fatalf("%s: %s attempt %d, want succeeded once", v.ID, v.Status, v.Attempt)
			}
		}
		if vb.StartedAt.Before(*va.FinishedAt) || vc.StartedAt.Before(*vb.FinishedAt) {
			t.Fatalf("out of order: a %v-%v, b %v-%v, c %v", va.StartedAt, va.FinishedAt, vb.StartedAt, vb.FinishedAt, vc.StartedAt)
		}
	})

	t.Run("a failure cancels the jobs after it", func(t *testing.T) {
		f := enqueueAfter(t, caller, "example.fail", `{"mode":"declared","secret":"hunter2"}`)
		g := enqueueAfter(t, caller, "example.hash", `{"text":"g","rounds":1}`, f.ID)
		h := enqueueAfter(t, caller, "example.hash", `{"text":"h","rounds":1}`, g.ID)
		vh := wait(h.ID)
		_, vg := get(t, caller, g.ID)
		for _, v := range []jobs.View{vg, vh} {
			if v.Status != jobs.StatusCancelled || v.Error == nil || *v.Error != jobs.CodeDependencyFailed || v.Attempt != 0 || v.StartedAt != nil {
				t.Fatalf("%s: %s error %v attempt %d started %v; want cancelled, dependency_failed, never started", v.ID, v.Status, v.Error, v.Attempt, v.StartedAt)
			}
		}
		// Its retry waits for the parent's: refused while the parent is failed.
		if a := call(t, "POST", "/v1/jobs/"+g.ID+"/retry", caller, "", ""); a.status != 409 || !strings.Contains(a.body, `"code":"dependency_failed"`) {
			t.Fatalf("retry of g: %d %s", a.status, a.body)
		}
	})

	t.Run("a fan-in of 50 runs its child once after the last", func(t *testing.T) {
		var parents []string
		for i := range 50 {
			parents = append(parents, enqueueAfter(t, caller, "example.sleep", fmt.Sprintf(`{"ms":%d,"steps":1}`, 20+10*(i%7))).ID)
		}
		child := enqueueAfter(t, caller, "example.hash", `{"text":"child","rounds":1}`, parents...)
		vc := wait(child.ID)
		if vc.Status != jobs.StatusSucceeded || vc.Attempt != 1 {
			t.Fatalf("child: %s attempt %d, want succeeded once", vc.Status, vc.Attempt)
		}
		for _, id := range parents {
			_, vp := get(t, caller, id)
			if vp.Status != jobs.StatusSucceeded || vc.StartedAt.Before(*vp.FinishedAt) {
				t.Fatalf("parent %s: %s finished %v, child started %v", id, vp.Status, vp.FinishedAt, vc.StartedAt)
			}
		}
	})

	t.Run("a replay is a new job", func(t *testing.T) {
		old := enqueueAfter(t, caller, "example.hash", `{"text":"once","rounds":1}`)
		wait(old.ID)
		a := call(t, "POST", "/v1/jobs/"+old.ID+"/replay", caller, "application/json", `{"payload":{"text":"twice","rounds":1}}`)
		if a.status != 202 {
			t.Fatalf("replay: %d %s", a.status, a.body)
		}
		var v jobs.View
		_ = json.Unmarshal([]byte(a.body), &v)
		if got := wait(v.ID); got.Status != jobs.StatusSucceeded || got.ReplayOf != old.ID || !strings.Contains(string(got.Result), "sha256") {
			t.Fatalf("the replay: %+v", got)
		}
		if a := call(t, "POST", "/v1/jobs/"+old.ID+"/replay", "someone-else", "", ""); a.status != 404 {
			t.Fatalf("another caller's replay: %d %s", a.status, a.body)
		}
	})
}
