package reliability_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// TestFlowControlOnTheLocalStack runs the flow control examples through
// the whole local stack with 30 handler slots (3 worker instances, batches
// of 10, 10 at once), counting inside the handlers (each run writes its
// span) how many ran at once (docs/guide/FLOW_CONTROL.md's load test):
//   - 100 jobs of 200 ms without a limit run more than 5 at once;
//   - 500 limited to 5 run exactly 5 at once at the most, all succeed on
//     their first attempt, none is dead-lettered, and all are final
//     within about 26 s (20 s of work at 5 at once);
//   - 100 limited to 1 per account over 10 accounts run 10 at once, each
//     account alone;
//   - 300 under a rate of 20 a second (601 under make reliability: 30 s)
//     start at 20 a second on average, within 10% (alone), and never more
//     than 20 within a second (less rateSlack);
//   - 100 under that rate beside 300 of the two limited kinds: never more
//     than 20 within a second (less rateSlack), by the handlers' starts.
func TestFlowControlOnTheLocalStack(t *testing.T) {
	ctx := context.Background()
	spans := t.TempDir()
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "flow", Queue: "flow", WorkerInstances: 3, BatchSize: 10, SweepEvery: 5 * time.Second,
		FunctionEnv: []string{"JOBS_WORKER_CONCURRENCY=10", examplekinds.SpansDirEnv + "=" + spans},
	})
	store := dynamostore.New(localaws.DynamoDBClient(stack.DynamoDBEndpoint), "flow", dynamostore.Config{})
	c := &client{api: stack.APIURL, http: &http.Client{Timeout: 10 * time.Second}}
	run := func(t *testing.T, kind string, n int, payload func(i int) string, bound time.Duration) ([]span, time.Duration) {
		t.Helper()
		start := time.Now()
		ids := enqueueAll(t, c, kind, kind, n, payload)
		recs := settle(t, store, ids, bound)
		took := time.Since(start)
		for _, id := range ids {
			if rec := recs[id]; rec == nil || rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
				t.Fatalf("%s job %s: %+v, want succeeded on attempt 1 (waiting spends no attempt)", kind, id, rec)
			}
		}
		if d := dlqDepth(t, stack); d != 0 {
			t.Fatalf("%d messages dead-lettered", d)
		}
		return readSpans(t, spans, ids), took
	}
	hold := func(ms int) func(int) string {
		return func(i int) string { return fmt.Sprintf(`{"ms":%d,"account":"acct-%d"}`, ms, i%10) }
	}

	t.Run("unlimited", func(t *testing.T) {
		got, took := run(t, examplekinds.Hold, 100, hold(200), time.Minute)
		peak, _ := overlap(got)
		t.Logf("100 jobs of 200 ms without a limit: peak %d at once, %v", peak, took.Round(100*time.Millisecond))
		if peak <= 5 {
			t.Fatalf("peak %d without a limit: the stack cannot show a limit of 5", peak)
		}
	})
	t.Run("concurrency 5", func(t *testing.T) {
		const n = 500
		got, took := run(t, examplekinds.HoldLimited, n, hold(200), 2*time.Minute)
		peak, _ := overlap(got)
		ideal := time.Duration(n/5) * 200 * time.Millisecond
		t.Logf("%d jobs of 200 ms limited to 5: peak %d at once, all final %v after the first enqueue (%v if every slot were always busy; starts a second: %v; time at each number running: %v)",
			n, peak, took.Round(100*time.Millisecond), ideal, perSecond(got), busyTimes(got))
		if peak != 5 {
			t.Fatalf("peak %d, want exactly 5", peak)
		}
		// The bound: 500 such jobs in about 26 s (20 s of work at
		// 5 at once), with 10% for a machine shared with other work, under
		// make reliability, which runs its scenarios alone. make test runs
		// this package beside the others on 2 cores, where the same code
		// has taken 31 s: there the bound is twice the issue's, which
		// still fails a limit whose slots sit idle.
		bound := time.Duration(size(2*26*10, 26*11)) * time.Second / 10
		if took > bound {
			t.Fatalf("%d jobs took %v, want at most about 26 s (%v here)", n, took.Round(100*time.Millisecond), bound)
		}
	})
	t.Run("1 per account", func(t *testing.T) {
		got, took := run(t, examplekinds.HoldPerAccount, 100, hold(300), time.Minute)
		peak, byAccount := overlap(got)
		t.Logf("100 jobs of 300 ms over 10 accounts, 1 per account: peak %d at once, %v", peak, took.Round(100*time.Millisecond))
		for acct, n := range byAccount {
			if n != 1 {
				t.Fatalf("%s ran %d at once, want 1", acct, n)
			}
		}
		if peak != 10 {
			t.Fatalf("peak %d over 10 accounts, want 10", peak)
		}
	})
	t.Run("rate 20 per second", func(t *testing.T) {
		n := size(300, 601)
		got, _ := run(t, examplekinds.HoldRate, n, hold(0), 2*time.Minute)
		starts := make([]time.Time, len(got))
		for i, s := range got {
			starts[i] = s.start
		}
		slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		spanned := starts[len(starts)-1].Sub(starts[0])
		rate := float64(len(starts)-1) / spanned.Seconds()
		worst := worstWindow(starts, time.Second)
		t.Logf("%d jobs under 20 a second: started over %v, %.2f a second, at most %d in one second", n, spanned.Round(100*time.Millisecond), rate, worst)
		// Alone (make reliability), 20 a second within 10%. Beside the other
		// packages on 2 cores (make test), deliveries come late more often,
		// and a late one reserves again, its first reservation lost: the
		// rate still holds in every window, at a lower average.
		if low := float64(size(12, 18)); rate < low || rate > 22 {
			t.Fatalf("observed %.2f starts a second, want 20 (at least %.0f here, at most 22)", rate, low)
		}
		if w := worstWindow(starts, time.Second-rateSlack); w > 20 {
			t.Fatalf("%d starts within one second (less %v), over the rate of 20", w, rateSlack)
		}
	})
	// The rate holds in every window, judged by the handlers' own starts,
	// while competing limited kinds keep the workers busy: jobs whose
	// reservations come due while their workers are busy reserve again
	// rather than all starting at once when delivered (on the old code: 20
	// a second for 2.5 s, a gap, then 48 starts within one second).
	t.Run("rate 20 per second beside limited kinds", func(t *testing.T) {
		var rated, limited, perAccount []string
		var wg sync.WaitGroup
		wg.Go(func() { rated = enqueueAll(t, c, examplekinds.HoldRate, "busy-rate", 100, hold(0)) })
		wg.Go(func() { limited = enqueueAll(t, c, examplekinds.HoldLimited, "busy-limited", 150, hold(200)) })
		wg.Go(func() { perAccount = enqueueAll(t, c, examplekinds.HoldPerAccount, "busy-account", 150, hold(200)) })
		wg.Wait()
		all := slices.Concat(rated, limited, perAccount)
		recs := settle(t, store, all, 3*time.Minute)
		for _, id := range all {
			if rec := recs[id]; rec == nil || rec.Status != jobs.StatusSucceeded {
				t.Fatalf("job %s: %+v, want succeeded", id, rec)
			}
		}
		got := readSpans(t, spans, rated)
		var starts []time.Time
		for _, s := range got {
			starts = append(starts, s.start)
		}
		slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		w := worstWindow(starts, time.Second-rateSlack)
		t.Logf("100 jobs at 20 a second beside 300 limited ones: at most %d starts within one second (less %v); starts a second: %v", w, rateSlack, perSecond(got))
		if w > 20 {
			t.Fatalf("%d starts within one second (less %v), over the rate of 20", w, rateSlack)
		}
	})
	record(row{Scenario: "flow", Load: "500 jobs of 200 ms limited to 5; 100 at 1 per account; 601 at 20/s", Faults: "none",
		Notes: "see TestFlowControlOnTheLocalStack's log for the peaks and the rate"})
}

// rateSlack is what a rate's window may lose at its end: a start may follow
// its reservation by the claim's latency (pkg/jobs rateOnTime, 100 ms) and
// the handler's own first moments.
const rateSlack = 150 * time.Millisecond

// worstWindow is the most starts (sorted) within any window of length d.
func worstWindow(starts []time.Time, d time.Duration) int {
	worst := 0
	for i := range starts {
		j := i
		for j < len(starts) && starts[j].Sub(starts[i]) < d {
			j++
		}
		worst = max(worst, j-i)
	}
	return worst
}

// enqueueAll enqueues n jobs of kind, 8 at a time, with the idempotency
// keys key-0, key-1...
func enqueueAll(t *testing.T, c *client, kind, key string, n int, payload func(i int) string) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				id, _, err := c.enqueue(kind, payload(i), key+"-"+strconv.Itoa(i))
				mu.Lock()
				ids[i] = id
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	return ids
}

type span struct {
	start, end time.Time
	account    string
}

// readSpans reads the spans the runs of ids wrote (each job's account is
// its index mod 10, as hold gives it).
func readSpans(t *testing.T, dir string, ids []string) []span {
	t.Helper()
	var out []span
	for i, id := range ids {
		b, err := os.ReadFile(filepath.Join(dir, id))
		if err != nil {
			t.Fatalf("job %s wrote no span: %v", id, err)
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			t.Fatalf("job %s's span %q", id, b)
		}
		s, _ := strconv.ParseInt(f[0], 10, 64)
		e, _ := strconv.ParseInt(f[1], 10, 64)
		out = append(out, span{start: time.Unix(0, s), end: time.Unix(0, e), account: fmt.Sprint("acct-", i%10)})
	}
	return out
}

// overlap returns the most spans open at once, overall and per account.
func overlap(spans []span) (int, map[string]int) {
	type edge struct {
		at      time.Time
		d       int
		account string
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.start, 1, s.account}, edge{s.end, -1, s.account})
	}
	// Ends before starts at the same instant: a run that ended as another
	// started did not overlap it.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d
	})
	now, peak := 0, 0
	open, most := map[string]int{}, map[string]int{}
	for _, e := range edges {
		now += e.d
		peak = max(peak, now)
		open[e.account] += e.d
		most[e.account] = max(most[e.account], open[e.account])
	}
	return peak, most
}

func dlqDepth(t *testing.T, stack *localstack.Stack) int {
	t.Helper()
	out, err := localaws.SQSClient(stack.SQSEndpoint).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(stack.Queues.DLQ), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	return n
}

// busyTimes is how long each number of spans ran at once, from the
// first start to the last end: how busy a limit's slots stayed.
func busyTimes(spans []span) map[int]time.Duration {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.start, 1}, edge{s.end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d
	})
	out := map[int]time.Duration{}
	now := 0
	for i, e := range edges {
		now += e.d
		if i+1 < len(edges) {
			out[now] += edges[i+1].at.Sub(e.at).Round(time.Millisecond)
		}
	}
	return out
}

func perSecond(spans []span) []int {
	first := spans[0].start
	for _, s := range spans {
		if s.start.Before(first) {
			first = s.start
		}
	}
	var out []int
	for _, s := range spans {
		i := int(s.start.Sub(first) / time.Second)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}
