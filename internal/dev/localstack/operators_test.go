package localstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// An operator's path through the API, and a batch ended by the cancel of
// its last queued job: that cancel (the cancel function) creates the
// batch's completion job at once, not the sweeper minutes later; the
// dead-letter queue is read and redriven through the operators' routes
// (served by a known sender of the queue, so no person sends to it); a
// sweep runs. Not parallel: it pauses the event source to keep the
// batch's jobs queued.
func TestCancelEndsABatchAndOperatorsRedrive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack.Pause()
	paused := true
	defer func() {
		if paused {
			stack.Unpause()
		}
	}()

	a := call(t, "POST", "/v1/batches", "ops", "application/json",
		`{"jobs":[{"kind":"example.hash","payload":{"text":"a","rounds":1}},{"kind":"example.hash","payload":{"text":"b","rounds":1}}],`+
			`"completion":{"kind":"example.hash","payload":{"text":"done","rounds":1}}}`)
	if a.status != 202 {
		t.Fatalf("POST /v1/batches: %d %s", a.status, a.body)
	}
	var b jobs.Batch
	if err := json.Unmarshal([]byte(a.body), &b); err != nil {
		t.Fatal(err)
	}
	// "What is queued, what is running now?", from the unfinished jobs only.
	if c := call(t, "GET", "/v1/counts", "ops", "", ""); c.status != 200 || !strings.Contains(c.body, `"example.hash":{"queued":2,"running":0,"waiting":0}`) {
		t.Fatalf("counts while the batch waits: %d %s", c.status, c.body)
	}
	if r := call(t, "GET", "/v1/jobs?status=running", "ops", "", ""); r.status != 200 || r.body != `{"jobs":[],"next_page_token":null}` {
		t.Fatalf("nothing running: %d %s, want an empty page without a token", r.status, r.body)
	}
	for i := range 2 {
		id := wire.BatchJobID(b.ID, i)
		if c := call(t, "POST", "/v1/jobs/"+id+"/cancel", "ops", "", ""); c.status != 200 {
			t.Fatalf("cancel %s: %d %s", id, c.status, c.body)
		}
	}
	g := call(t, "GET", "/v1/batches/"+b.ID, "ops", "", "")
	if err := json.Unmarshal([]byte(g.body), &b); err != nil || b.Status == jobs.StatusRunning || b.CompletionJobID == nil || b.Counts.Cancelled != 2 {
		t.Fatalf("after its last job was cancelled the batch is %s", g.body)
	}
	if v := call(t, "GET", "/v1/jobs/"+*b.CompletionJobID, "ops", "", ""); v.status != 200 || !strings.Contains(v.body, `"status":"queued"`) {
		t.Fatalf("the completion job: %d %s", v.status, v.body)
	}

	// A dead letter: a job's message that came back too often.
	body := `{"job_id":"` + wire.BatchJobID(b.ID, 0) + `"}`
	sent, err := localaws.SQSClient(stack.SQSEndpoint).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(stack.Queues.DLQ), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatal(err)
	}
	if r := call(t, "POST", "/v1/admin/dead-letters"+"/peek", "ops", "application/json", `{}`); r.status != 403 {
		t.Fatalf("a caller who is not an operator peeks: %d %s", r.status, r.body)
	}
	var depths sqsqueue.Depths
	if r := call(t, "GET", "/v1/admin/dead-letters", "operator", "", ""); r.status != 200 || json.Unmarshal([]byte(r.body), &depths) != nil || depths.DeadLetters < 1 {
		t.Fatalf("the depths: %d %s", r.status, r.body)
	}
	var peeked httpapi.Peeked
	r := call(t, "POST", "/v1/admin/dead-letters"+"/peek", "operator", "application/json", `{"max":50}`)
	if r.status != 200 || json.Unmarshal([]byte(r.body), &peeked) != nil {
		t.Fatalf("peek: %d %s", r.status, r.body)
	}
	found := false
	for _, dl := range peeked.DeadLetters {
		if dl.ID == aws.ToString(sent.MessageId) {
			found = dl.Shape == fmt.Sprintf("JSON object of %d bytes with keys [job_id]", len(body)) && strings.Contains(dl.Why, "a job's message")
		}
	}
	if !found || strings.Contains(r.body, wire.BatchJobID(b.ID, 0)) {
		t.Fatalf("the peek shows the message by its shape only: %s", r.body)
	}
	if r := call(t, "POST", "/v1/admin/dead-letters"+"/redrive", "operator", "application/json", `{"id":"`+aws.ToString(sent.MessageId)+`"}`); r.status != 200 {
		t.Fatalf("redrive: %d %s", r.status, r.body)
	}
	if r := call(t, "POST", "/v1/admin/dead-letters"+"/redrive", "operator", "application/json", `{"id":"`+aws.ToString(sent.MessageId)+`"}`); r.status != 404 {
		t.Fatalf("redrive again: %d %s", r.status, r.body)
	}

	stack.Unpause()
	paused = false
	if v, _ := waitFinal(t, "ops", *b.CompletionJobID, 30*time.Second); v.Status != jobs.StatusSucceeded {
		t.Fatalf("the completion job ended %s", v.Status)
	}
	if err := stack.SweepNow(ctx); err != nil {
		t.Fatalf("a sweep: %v", err)
	}
}

// Flow control through the real functions: example.hold_capped holds at
// most 10 queued jobs, so the 11th POST (counted by the enqueue function
// from the capped kinds' index) is a 429 queue_full with Retry-After;
// GET /v1/kinds (the getjob function) shows the cap. Not parallel: it
// pauses the event source to keep the jobs queued.
func TestQueueCapOnTheLocalStack(t *testing.T) {
	stack.Pause()
	defer stack.Unpause()
	for i := range 10 {
		if a := call(t, "POST", "/v1/jobs", "capper", "application/json", fmt.Sprintf(`{"kind":"example.hold_capped","payload":{"ms":%d}}`, i)); a.status != 202 {
			t.Fatalf("job %d under the cap: %d %s", i, a.status, a.body)
		}
	}
	a := call(t, "POST", "/v1/jobs", "capper", "application/json", `{"kind":"example.hold_capped","payload":{"ms":10}}`)
	if a.status != 429 || a.header.Get("Retry-After") == "" || !strings.Contains(a.body, `"code":"queue_full"`) {
		t.Fatalf("the 11th job: %d %v %s, want 429 queue_full with Retry-After", a.status, a.header, a.body)
	}
	if c := call(t, "GET", "/v1/counts", "capper", "", ""); c.status != 200 || !strings.Contains(c.body, `"example.hold_capped":{"queued":10,"running":0,"waiting":0}`) {
		t.Fatalf("counts: %d %s, want the 10 accepted", c.status, c.body)
	}
	k := call(t, "GET", "/v1/kinds", "capper", "", "")
	var kinds struct{ Kinds []jobs.KindInfo }
	if err := json.Unmarshal([]byte(k.body), &kinds); k.status != 200 || err != nil {
		t.Fatalf("kinds: %d %s", k.status, k.body)
	}
	limits := map[string]jobs.KindInfo{}
	for _, info := range kinds.Kinds {
		limits[info.Name] = info
	}
	if limits["example.hold_capped"].MaxQueued != 10 || limits["example.hold_limited"].Concurrency != 5 {
		t.Fatalf("kinds: %+v", limits)
	}
}
