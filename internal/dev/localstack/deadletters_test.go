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
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// The operators' dead-letter routes through the real functions: an
// envelope planted in the dead-letter queue stays there through "redrive
// all" (which says it skipped it) and is refused by id, until the
// operator asks for any shape; each lane's dead-letter queue is served by
// name, and its letters go back to the lane's own queue. Not parallel:
// it pauses the event sources to watch the bulk lane's queue.
func TestRedriveLeavesForgedMessagesAndServesEveryLane(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client := localaws.SQSClient(stack.SQSEndpoint)
	post := func(path, body string) answer {
		t.Helper()
		return call(t, "POST", "/v1/admin/dead-letters"+path, "operator", "application/json", body)
	}

	// An insider plants an envelope in the default lane's dead-letter queue.
	key := fmt.Sprintf("forged-%d", time.Now().UnixNano())
	forged, _ := json.Marshal(map[string]any{"kind": "example.hash", "payload": map[string]any{"text": "forged", "rounds": 1}, "idempotency_key": key})
	sent, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(stack.Queues.DLQ), MessageBody: aws.String(string(forged))})
	if err != nil {
		t.Fatal(err)
	}
	forgedID := aws.ToString(sent.MessageId)
	r := post("/redrive", `{"all":true}`)
	var res httpapi.RedriveAnswer
	if r.status != 200 || json.Unmarshal([]byte(r.body), &res) != nil {
		t.Fatalf("redrive all: %d %s", r.status, r.body)
	}
	skipped := 0
	for _, s := range res.Skipped {
		if s.Sort == wire.SortEnvelope {
			skipped = s.Count
		}
	}
	if skipped < 1 {
		t.Fatalf("redrive all skipped no envelope: %s", r.body)
	}
	var peeked httpapi.Peeked
	if r := post("/peek", `{"max":50}`); r.status != 200 || json.Unmarshal([]byte(r.body), &peeked) != nil {
		t.Fatalf("peek: %d %s", r.status, r.body)
	}
	found := false
	for _, dl := range peeked.DeadLetters {
		if dl.ID == forgedID {
			// fauxqs answers every SenderId with its account.
			found = dl.Sort == wire.SortEnvelope && dl.Redrive == sqsqueue.RedriveOnlyAnyShape && dl.Sender != ""
		}
	}
	if !found {
		t.Fatalf("after redrive all the planted envelope is not in the dead-letter queue, shown with its sort and sender: %s", r.body)
	}
	if r := post("/redrive", `{"id":"`+forgedID+`"}`); r.status != 409 || !strings.Contains(r.body, `"code":"not_redrivable"`) {
		t.Fatalf("redrive the planted envelope by id: %d %s", r.status, r.body)
	}
	job := wire.DerivedID("envelope-idempotency", examplekinds.DefaultRouteOwner, key)
	if a := call(t, "GET", "/v1/jobs/"+job, "local", "", ""); a.status != 404 {
		t.Fatalf("the planted envelope became a job: %d %s", a.status, a.body)
	}

	// The bulk lane: a job whose message ended in the lane's DLQ.
	stack.Pause()
	paused := true
	defer func() {
		if paused {
			stack.Unpause()
		}
	}()
	bulk := stack.Lanes["bulk"]
	v := enqueue(t, "dlq-lanes", examplekinds.HoldBulk, `{"ms":1}`)
	moved := false
	for range 20 {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(bulk.Queue), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			// Sent first, the reference also says when it was sent.
			if id, err := message.Decode(aws.ToString(m.Body)); err != nil || id != v.ID {
				_, _ = client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(bulk.Queue), ReceiptHandle: m.ReceiptHandle})
				continue
			}
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(bulk.Queue), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
			if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(bulk.DLQ), MessageBody: m.Body}); err != nil {
				t.Fatal(err)
			}
			moved = true
		}
		if moved {
			break
		}
	}
	if !moved {
		t.Fatalf("the bulk job %s's message was not on the bulk lane's queue", v.ID)
	}
	depths := func() sqsqueue.Depths {
		t.Helper()
		var d sqsqueue.Depths
		if r := call(t, "GET", "/v1/admin/dead-letters", "operator", "", ""); r.status != 200 || json.Unmarshal([]byte(r.body), &d) != nil {
			t.Fatalf("depths: %d %s", r.status, r.body)
		}
		return d
	}
	before := depths()
	if before.LaneDeadLetters["bulk"] < 1 {
		t.Fatalf("depths %+v: the bulk lane's dead letter is not counted", before)
	}
	r = post("/peek", `{"lane":"bulk"}`)
	if r.status != 200 || !strings.HasPrefix(r.body, `{"lane":"bulk",`) || !strings.Contains(r.body, `"sort":"job"`) {
		t.Fatalf("peek the bulk lane: %d %s", r.status, r.body)
	}
	r = post("/redrive", `{"all":true,"lane":"bulk"}`)
	if r.status != 200 || json.Unmarshal([]byte(r.body), &res) != nil || res.Lane != "bulk" || res.Redriven < 1 {
		t.Fatalf("redrive the bulk lane: %d %s", r.status, r.body)
	}
	after := depths()
	if after.Lanes["bulk"] != before.Lanes["bulk"]+res.Redriven || after.LaneDeadLetters["bulk"] != before.LaneDeadLetters["bulk"]-res.Redriven || after.Queue != before.Queue {
		t.Fatalf("depths before %+v, after %+v: the bulk lane's dead letters did not go back to its own queue", before, after)
	}
	if r := post("/peek", `{"lane":"nope"}`); r.status != 400 {
		t.Fatalf("peek an unknown lane: %d %s", r.status, r.body)
	}
	stack.Unpause()
	paused = false
	if got, _ := waitFinal(t, "dlq-lanes", v.ID, 30*time.Second); got.Status != jobs.StatusSucceeded {
		t.Fatalf("the redriven bulk job ended %s", got.Status)
	}

	// Asked for any shape, the planted envelope moves, and the worker
	// makes its job (what the operator asked for, once its sender is
	// known).
	if r := post("/redrive", `{"id":"`+forgedID+`","shapes":"any"}`); r.status != 200 {
		t.Fatalf("redrive the envelope with any shape: %d %s", r.status, r.body)
	}
	if got, _ := waitFinal(t, "local", job, 30*time.Second); got.Status != jobs.StatusSucceeded {
		t.Fatalf("the envelope's job ended %s", got.Status)
	}
}
