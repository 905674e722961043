package jobs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// emfRecord is one Embedded Metric Format record, checked against the
// specification's rules as it is parsed.
type emfRecord struct {
	raw     map[string]any
	metrics map[string]string // name -> unit
	dims    []string
}

func parseEMF(t *testing.T, out string) []emfRecord {
	t.Helper()
	var recs []emfRecord
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatalf("not one JSON object per line: %q", sc.Text())
		}
		aws, ok := raw["_aws"].(map[string]any)
		if !ok {
			t.Fatalf("no _aws: %s", sc.Text())
		}
		if ts, ok := aws["Timestamp"].(float64); !ok || ts <= 0 || ts != float64(int64(ts)) {
			t.Fatalf("Timestamp must be epoch milliseconds: %v", aws["Timestamp"])
		}
		directives, _ := aws["CloudWatchMetrics"].([]any)
		if len(directives) != 1 {
			t.Fatalf("CloudWatchMetrics: %v", aws["CloudWatchMetrics"])
		}
		d := directives[0].(map[string]any)
		if ns, _ := d["Namespace"].(string); ns == "" || len(ns) > 255 {
			t.Fatalf("Namespace %q", d["Namespace"])
		}
		rec := emfRecord{raw: raw, metrics: map[string]string{}}
		sets, _ := d["Dimensions"].([]any)
		if len(sets) == 0 || len(sets) > 2 {
			t.Fatalf("Dimensions %v", d["Dimensions"])
		}
		_, enqueues := raw["JobsEnqueued"]
		switch {
		case enqueues && (jsonString(sets) != `[["kind"],[]]` || raw["service"] != nil):
			// One record per enqueue: by kind and in all, no service.
			t.Fatalf("JobsEnqueued's dimension sets %v (service %v), want [[kind],[]] and no service", sets, raw["service"])
		case !enqueues && len(sets) == 2 && jsonString(sets[1]) != `["service"]`:
			t.Fatalf("the second dimension set must be the service alone (for alarms): %v", sets[1])
		}
		for _, name := range sets[0].([]any) {
			n := name.(string)
			if _, ok := raw[n].(string); !ok {
				t.Fatalf("dimension %s has no string value at the top level: %s", n, sc.Text())
			}
			rec.dims = append(rec.dims, n)
		}
		if len(rec.dims) > 30 {
			t.Fatalf("%d dimensions", len(rec.dims))
		}
		ms, _ := d["Metrics"].([]any)
		if len(ms) == 0 || len(ms) > 100 {
			t.Fatalf("%d metrics", len(ms))
		}
		for _, m := range ms {
			mm := m.(map[string]any)
			name := mm["Name"].(string)
			unit, _ := mm["Unit"].(string)
			if !metricnames.Known(name) {
				t.Fatalf("metric %q is not named in internal/metricnames, where the alarms, the dashboard and the CLI find it", name)
			}
			if unit != "" && unit != "Milliseconds" { // none: a count (internal/emf)
				t.Fatalf("unit %q", unit)
			}
			switch v := raw[name].(type) {
			case float64:
			case []any:
				if len(v) == 0 || len(v) > 100 {
					t.Fatalf("%s: %d values", name, len(v))
				}
			default:
				t.Fatalf("metric %s has no numeric value: %v", name, raw[name])
			}
			rec.metrics[name] = unit
		}
		recs = append(recs, rec)
	}
	return recs
}

// value returns the sum of metric name over the records whose dimensions
// have the given values.
func value(recs []emfRecord, name string, dims map[string]string) (float64, bool) {
	total, found := 0.0, false
	for _, r := range recs {
		if _, ok := r.metrics[name]; !ok {
			continue
		}
		match := true
		for k, v := range dims {
			if r.raw[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		found = true
		switch v := r.raw[name].(type) {
		case float64:
			total += v
		case []any:
			for _, x := range v {
				total += x.(float64)
			}
		}
	}
	return total, found
}

func TestMetricsOfEveryOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out testenv.SyncBuffer
		metrics := &jobs.Metrics{Namespace: "lambdajobs/test", Service: "worker", Writer: &out}
		mem := jobstest.NewMemStore(nil)
		reg := jobs.NewRegistry()
		ok := jobs.MustRegister(reg, "ok", sleeper, nil)
		bad := jobs.MustRegister(reg, "bad", func(context.Context, *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
			return jobs.NoResult{}, jobs.Fail("nope", nil)
		}, &jobs.KindOpts{FailureCodes: []string{"nope"}})
		slow := jobs.MustRegister(reg, "slow", sleeper, nil)
		flaky := jobs.MustRegister(reg, "flaky", func(context.Context, *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
			return jobs.NoResult{}, jobs.Retry(errors.New("later"))
		}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 3}})
		// A run that sleeps parks: it ends no attempt and no job.
		nap := jobs.MustRegister(reg, "nap", func(ctx context.Context, job *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
			return jobs.NoResult{}, job.Sleep(ctx, "nap", time.Hour)
		}, nil)
		sealer, _ := jobs.NewAESSealer([]byte(strings.Repeat("k", 32)))
		queue := &jobstest.MemQueue{}
		var enqueued testenv.SyncBuffer
		svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: mem, Queue: queue, Sealer: sealer,
			Metrics: &jobs.Metrics{Namespace: "lambdajobs/test", Service: "enqueue", Writer: &enqueued}})
		w, err := testroles.Worker(jobs.Config{Registry: reg, Store: mem, Queue: queue, Metrics: metrics, CancelCheck: -1, Sealer: sealer})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var ids []string
		for _, enq := range []func() (*jobs.EnqueueResult, error){
			func() (*jobs.EnqueueResult, error) { return ok.Enqueue(ctx, svc, "o", sleepPayload{For: "2s"}, nil) },
			func() (*jobs.EnqueueResult, error) { return bad.Enqueue(ctx, svc, "o", sleepPayload{}, nil) },
			func() (*jobs.EnqueueResult, error) { return slow.Enqueue(ctx, svc, "o", sleepPayload{For: "1h"}, nil) },
			func() (*jobs.EnqueueResult, error) { return flaky.Enqueue(ctx, svc, "o", sleepPayload{}, nil) },
			func() (*jobs.EnqueueResult, error) { return nap.Enqueue(ctx, svc, "o", sleepPayload{}, nil) },
		} {
			res, err := enq()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Job.ID)
		}
		time.Sleep(time.Second) // a second in the queue
		ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		var msgs []string
		for _, id := range ids {
			msgs = append(msgs, message.Encode(id))
		}
		w.HandleSQS(ictx, sqsEvent(msgs...))

		recs := parseEMF(t, out.String())
		for _, r := range recs {
			if r.raw["service"] != "worker" {
				t.Fatalf("a record without the service dimension: %v", r.raw)
			}
			for _, d := range r.dims {
				if d != "service" && d != "kind" && d != "code" {
					t.Fatalf("dimension %q: only service, kind and code", d)
				}
			}
		}
		want := []struct {
			name string
			dims map[string]string
			min  float64
		}{
			{"JobsStarted", map[string]string{"kind": "ok"}, 1},
			{"QueueLatency", map[string]string{"kind": "ok"}, 1000},
			{"JobsSucceeded", map[string]string{"kind": "ok"}, 1},
			{"RunDuration", map[string]string{"kind": "ok"}, 2000},
			{"Attempts", map[string]string{"kind": "ok"}, 1},
			{"JobsFailed", map[string]string{"kind": "bad", "code": "nope"}, 1},
			{"JobsFailed", map[string]string{"kind": "slow", "code": jobs.CodeTimedOut}, 1},
			{"JobsTimedOut", map[string]string{"kind": "slow"}, 1},
			{"JobsRetried", map[string]string{"kind": "flaky"}, 1},
		}
		for _, w := range want {
			got, found := value(recs, w.name, w.dims)
			if !found || got < w.min {
				t.Errorf("%s %v = %v (found %v), want at least %v\n%s", w.name, w.dims, got, found, w.min, out.String())
			}
		}
		if _, found := value(recs, "HandlersAbandoned", map[string]string{"kind": "slow"}); found {
			t.Error("a handler that honoured its deadline counted as abandoned")
		}
		if _, found := value(recs, "JobsSucceeded", map[string]string{"kind": "flaky"}); found {
			t.Error("a retried job counted as succeeded")
		}
		for _, name := range []string{"Attempts", "JobsSucceeded", "JobsFailed"} {
			if _, found := value(recs, name, map[string]string{"kind": "nap"}); found {
				t.Errorf("a run that slept counted in %s, as if its job had ended", name)
			}
		}
		if got, _ := value(recs, "JobsStarted", map[string]string{"kind": "nap"}); got != 1 {
			t.Errorf("JobsStarted for the run that slept = %v, want 1", got)
		}
		if got, _ := value(parseEMF(t, enqueued.String()), "JobsEnqueued", map[string]string{}); got != 5 {
			t.Errorf("JobsEnqueued = %v, want 5", got)
		}
		if n := strings.Count(out.String(), "\n"); n > 14 {
			t.Errorf("%d lines for one invocation of 5 jobs: metrics are not gathered per invocation", n)
		}
	})
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The API's own transitions are counted too: a queued job cancelled, and
// a failed or cancelled job retried, one by one and in bulk.
func TestMetricsOfTheAPIsTransitions(t *testing.T) {
	var out testenv.SyncBuffer
	mem := jobstest.NewMemStore(nil)
	reg := jobs.NewRegistry()
	k := jobs.MustRegister(reg, "ok", sleeper, nil)
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: mem, Queue: &jobstest.MemQueue{}, PageTokenKey: []byte(strings.Repeat("k", 32)),
		Metrics: &jobs.Metrics{Namespace: "lambdajobs/test", Service: "cancel", Writer: &out}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	for range 3 {
		res, err := k.Enqueue(ctx, svc, "o", sleepPayload{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	if _, err := svc.Cancel(ctx, "o", ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Resubmit(ctx, "o", ids[0]); err != nil {
		t.Fatal(err)
	}
	if res, err := svc.Bulk(ctx, "o", jobs.BulkRequest{Action: jobs.BulkCancel, Status: jobs.StatusQueued}); err != nil || res.Changed != 3 {
		t.Fatalf("bulk cancel: %+v %v", res, err)
	}
	if res, err := svc.Bulk(ctx, "o", jobs.BulkRequest{Action: jobs.BulkResubmit, Kind: "ok"}); err != nil || res.Changed != 3 {
		t.Fatalf("bulk retry: %+v %v", res, err)
	}
	recs := parseEMF(t, out.String())
	for name, want := range map[string]float64{"JobsEnqueued": 3, "JobsCancelled": 4, "JobsResubmitted": 4} {
		dims := map[string]string{"kind": "ok", "service": "cancel"}
		if name == "JobsEnqueued" {
			dims = map[string]string{"kind": "ok"}
		}
		if got, _ := value(recs, name, dims); got != want {
			t.Errorf("%s = %v, want %v\n%s", name, got, want, out.String())
		}
	}
}

// A sweep writes every sweeper metric, each one a name the alarms and the
// dashboard can find.
func TestMetricsOfASweep(t *testing.T) {
	var out testenv.SyncBuffer
	sw, err := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: jobstest.NewMemStore(nil), Queue: &jobstest.MemQueue{},
		Metrics: &jobs.Metrics{Namespace: "lambdajobs/test", Service: "sweeper", Writer: &out}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	recs := parseEMF(t, out.String())
	for _, name := range []string{metricnames.SweepResent, metricnames.SweepInterrupted, metricnames.SweepRetried, metricnames.SweepBatches,
		metricnames.SweepAfter, metricnames.SweepErrors, metricnames.SweepComplete, metricnames.SweepDuration} {
		if _, found := value(recs, name, map[string]string{metricnames.Service: "sweeper"}); !found {
			t.Errorf("a sweep did not write %s\n%s", name, out.String())
		}
	}
}
