package reliability_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// killingProvider stands before example.order's provider and SIGKILLs the
// worker at each of its endpoints twice: at the first call, before the
// step's side effect (so after the previous step's result landed), and at
// the second, after the side effect and before the step's result can
// land (the worker never gets the answer). Later calls pass.
type killingProvider struct {
	next  *examplekinds.OrderProvider
	kill  func()
	mu    sync.Mutex
	calls map[string]int
	kills []string
}

func (k *killingProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	endpoint := strings.TrimPrefix(r.URL.Path, "/")
	k.mu.Lock()
	k.calls[endpoint]++
	n := k.calls[endpoint]
	k.mu.Unlock()
	switch n {
	case 1:
		k.killed(endpoint + " before its side effect")
	case 2:
		k.next.ServeHTTP(httptest.NewRecorder(), r)
		k.killed(endpoint + " after its side effect")
	default:
		k.next.ServeHTTP(w, r)
	}
}

func (k *killingProvider) killed(at string) {
	k.mu.Lock()
	k.kills = append(k.kills, at)
	k.mu.Unlock()
	k.kill()
}

// TestOrderWorkflowSurvivesKills runs example.order (charge, ship with a
// callback token, wait for the carrier, sleep, review e-mail) on the local
// stack with its worker SIGKILLed six times: before and after each step's
// side effect. Its provider honours the steps' idempotency keys, so each
// side effect happens once: the order succeeds with one charge, one
// shipping and one review, whatever the kills.
func TestOrderWorkflowSurvivesKills(t *testing.T) {
	ctx := context.Background()
	const workerTimeout, grace = 6 * time.Second, 7 * time.Second
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "order", Queue: "order", WorkerTimeout: workerTimeout, WorkerInstances: 1, BatchSize: 1,
		SweepEvery:  2 * time.Second,
		FunctionEnv: []string{"JOBS_DISPATCH_GRACE=" + grace.String(), "JOBS_HANDLER_RESERVE=1s", "JOBS_FINAL_WRITE_TIMEOUT=500ms"},
	})
	provider := examplekinds.NewOrderProvider()
	killer := &killingProvider{next: provider, kill: stack.Workers()[0].Kill, calls: map[string]int{}}
	srv := httptest.NewServer(killer)
	defer srv.Close()
	c := &client{api: stack.APIURL, http: &http.Client{Timeout: 10 * time.Second}}
	id, _, err := c.enqueue(examplekinds.Order, fmt.Sprintf(`{"order":"o-k","amount_cents":500,"provider":%q,"ship_wait_minutes":30,"review_after_seconds":2}`, srv.URL), "order")
	if err != nil {
		t.Fatal(err)
	}
	var shipping examplekinds.ProviderCall
	select {
	case shipping = <-provider.Shipping:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the order was never shipped; kills %v", killer.kills)
	}
	store := dynamostore.New(localaws.DynamoDBClient(stack.DynamoDBEndpoint), "order", dynamostore.Config{})
	// The carrier answers once the order waits for it (the step that
	// asked was killed after its side effect, so it runs again first).
	deadline := time.Now().Add(3 * time.Minute)
	for {
		rec, err := store.Get(ctx, id)
		if err == nil && rec.Status == jobs.StatusQueued && rec.WaitingOn != "" && strings.HasPrefix(rec.WaitingOn, "signal:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the order never waited for its carrier: %+v; kills %v", rec, killer.kills)
		}
		time.Sleep(100 * time.Millisecond)
	}
	req, _ := http.NewRequest(http.MethodPost, stack.APIURL+"/v1/callbacks/"+shipping.CallbackToken, strings.NewReader(`{"tracking":"1Z-k"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the carrier's callback: %d", resp.StatusCode)
	}
	rec := settle(t, store, []string{id}, 4*time.Minute)[id]
	calls, effects := provider.Counts()
	t.Logf("kills %v; calls that reached the provider %v, side effects %v; attempt %d", killer.kills, calls, effects, rec.Attempt)
	if rec == nil || rec.Status != jobs.StatusSucceeded || string(rec.Result) != `{"order":"o-k","charge":"ch-o-k","tracking":"1Z-k","reviewed":true}` {
		t.Fatalf("the order: %+v", rec)
	}
	if len(killer.kills) != 6 || effects["charge"] != 1 || effects["ship"] != 1 || effects["review"] != 1 {
		t.Fatalf("%d kills, side effects %v: want 6 kills and each step's side effect once", len(killer.kills), effects)
	}
}
