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
//   - digest: {"text"}, up to 16 MiB (so an upload's: POST /v1/uploads) →
//     {"bytes", "sha256"} of the text;
//   - internal.cleanup: an internal kind, which no caller may enqueue.
//
// It keeps payloads past 64 KiB as objects and takes uploads, as a stack
// with the parts bucket does; a part's presigned link (mem://uploads/...)
// is PUT to the API's URL at /_parts/uploads/..., which refuses
// a PUT that carries credentials, as S3 refuses a presigned request that
// also has an Authorization header.
package apitest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	jobs.MustRegister(reg, "digest", func(_ context.Context, j *jobs.Job[Text]) (jobs.JSON[Digest], error) {
		sum := sha256.Sum256([]byte(j.Payload.Text))
		return jobs.JSON[Digest]{V: Digest{Bytes: len(j.Payload.Text), SHA256: hex.EncodeToString(sum[:])}}, nil
	}, &jobs.KindOpts{MaxPayloadBytes: 16 << 20})
	jobs.MustRegister(reg, "internal.cleanup", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Internal: true})
	sealer, err := jobs.NewAESSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	store.KeepPayloadsApart(64 << 10)
	store.KeepObjectsOver(64 << 10)
	uploads := store.Uploads().(*jobstest.MemUploads)
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
	mux := http.NewServeMux()
	mux.Handle("/", &localstack.Gateway{Enqueue: fn, GetJob: fn, WaitJob: fn, Cancel: fn})
	mux.HandleFunc("PUT "+partsPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" || r.Header.Get("X-Local-Caller") != "" {
			http.Error(w, "a presigned part's PUT carries no other credentials", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil {
			http.Error(w, "read the part", http.StatusBadRequest)
			return
		}
		etag, err := uploads.PutPart("mem://"+strings.TrimPrefix(r.URL.Path, partsPath)+"?"+r.URL.RawQuery, body)
		if err != nil {
			http.Error(w, "no such upload", http.StatusForbidden)
			return
		}
		w.Header().Set("ETag", etag)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &API{URL: srv.URL, queue: queue, worker: worker}
}

// partsPath is where the API's server takes parts' PUTs.
const partsPath = "/_parts/"

// Text is digest's payload.
type Text struct {
	Text string `json:"text"`
}

// Digest is digest's result.
type Digest struct {
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
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
