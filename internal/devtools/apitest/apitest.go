// Package apitest runs the real HTTP API of a deployment in-process, for
// the tests of its clients in this module (the MCP server, the
// TypeScript client): the API's handler behind the local stack's gateway
// (whose X-Local-Caller names the caller), over a store and a queue in
// memory, with the real worker to run what was queued. Its kinds:
//
//   - greet: {"name", "token" (jobs:"secret")} → "hello <name>"; a
//     missing name fails no_name;
//   - shout.word: a string → the string in capitals;
//   - approve: waits for the signal "approval" (a bool) and returns it;
//   - internal.cleanup: an internal kind, which no caller may enqueue.
package apitest

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// Greeting is greet's payload.
type Greeting struct {
	Name  string `json:"name"`
	Token string `json:"token" jobs:"secret"`
}

// API is a running API.
type API struct {
	// URL is the API's base URL.
	URL string

	mu     sync.Mutex
	ran    int
	queue  *jobstest.MemQueue
	worker *jobs.Worker
}

// Start starts the API for the test's life.
func Start(t testing.TB) *API {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "greet", func(_ context.Context, j *jobs.Job[Greeting]) (jobs.JSON[string], error) {
		if j.Payload.Name == "" {
			return jobs.JSON[string]{}, jobs.Fail("no_name", errors.New("no name"))
		}
		return jobs.JSON[string]{V: "hello " + j.Payload.Name}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"no_name"}})
	jobs.MustRegister(reg, "shout.word", func(_ context.Context, j *jobs.Job[string]) (jobs.JSON[string], error) {
		return jobs.JSON[string]{V: strings.ToUpper(j.Payload)}, nil
	}, nil)
	jobs.MustRegister(reg, "approve", func(ctx context.Context, j *jobs.Job[struct{}]) (jobs.JSON[bool], error) {
		ok, _, err := jobs.WaitForSignal[bool](ctx, j, "approval", time.Hour)
		return jobs.JSON[bool]{V: ok}, err
	}, &jobs.KindOpts{Signals: map[string]any{"approval": false}})
	jobs.MustRegister(reg, "internal.cleanup", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Internal: true})
	sealer, err := jobs.NewAESSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, PageTokenKey: make([]byte, 32), Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(svc, httpapi.Config{})
	fn := localstack.FunctionHandler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse](h.Route)
	srv := httptest.NewServer(&localstack.Gateway{Enqueue: fn, GetJob: fn, WaitJob: fn, Cancel: fn})
	t.Cleanup(srv.Close)
	return &API{URL: srv.URL, queue: queue, worker: worker}
}

// Work runs the jobs queued since it last ran through the real worker,
// each message once, in the order they were sent.
func (a *API) Work() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for sent := a.queue.Sent(); a.ran < len(sent); a.ran++ {
		id := sent[a.ran]
		_, _ = a.worker.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: fmt.Sprintf(`{"job_id":%q}`, id)}}})
	}
}

// WorkUntil runs Work every 10 ms until ctx ends, as a worker polling
// the queue would.
func (a *API) WorkUntil(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.Work()
		}
	}
}
