package dynamostore_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// uploadsPayload is a JSON payload of about n bytes that compresses as
// real ones do: a list of uploaded objects, each with a random key, ETag,
// size and sequencer (about 2.5 to 1 under DEFLATE, as an S3 event record).
func uploadsPayload(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	hexOf := func(bytes int) string {
		b := make([]byte, bytes)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return hex.EncodeToString(b)
	}
	var objs []string
	size := len(`{"objects":[]}`)
	for size < n {
		o := fmt.Sprintf(`{"key":"uploads/%s.jpg","etag":"%s","size":%d,"sequencer":"%s"}`, hexOf(8), hexOf(16), rng.IntN(1<<24), hexOf(8))
		if size+len(o)+1 > n && len(objs) > 0 {
			break
		}
		objs = append(objs, o)
		size += len(o) + 1
	}
	return []byte(`{"objects":[` + strings.Join(objs, ",") + `]}`)
}

// runOne enqueues payload (with message first) through the client's
// Service, receives its message and hands it to the client's Worker, and
// returns the job's id.
func runOne(t *testing.T, c *jobs.Client, sqsClient *sqs.Client, queue string, owner, kind string, payload []byte) string {
	t.Helper()
	ctx := context.Background()
	res, err := c.Service().Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: kind, Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	out, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("received %d messages (%v), want the job's one", len(out.Messages), err)
	}
	m := out.Messages[0]
	resp, _ := c.Worker().HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body)}}})
	if len(resp.BatchItemFailures) > 0 {
		t.Fatalf("batch item failures %v", resp.BatchItemFailures)
	}
	return res.Job.ID
}

// wantSucceeded fails t unless the owner's job id succeeded and GET shows
// its payload.
func wantSucceeded(t *testing.T, c *jobs.Client, owner, id string, payload []byte) {
	t.Helper()
	v, err := c.Service().Get(context.Background(), owner, id)
	if err != nil || v.Status != jobs.StatusSucceeded {
		t.Fatalf("the job: %+v %v", v, err)
	}
	if !jsonEqual(v.Payload, payload) {
		t.Fatalf("GET shows a payload of %d bytes, want the %d enqueued", len(v.Payload), len(payload))
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && fmt.Sprint(x) == fmt.Sprint(y)
}

// TestUnitsPerPayloadSize measures a job's life through Service.Enqueue
// (message first), the SQS emulator and the worker on DynamoDB Local, for
// payloads of 40 B, 1.2 KB, 10 KB and 100 KB: the handler publishes a
// partial result and heartbeats before it returns. A payload that would
// take the job's item past one write unit is written once, compressed, in
// an item of its own, and read once at the claim (a strongly consistent
// read): every later write of the job costs 1 table unit whatever its
// payload. Before payload items (the payload in the job's item, measured
// the same way) each write rewrote it. docs/evidence/CAPACITY.md records the table
// this prints.
func TestUnitsPerPayloadSize(t *testing.T) {
	client, sqsClient := testenv.DynamoDB(t), testenv.SQS(t)
	owner := "arn:aws:sts::123456789012:assumed-role/ingest-pipeline-production/i-0abcdef1234567890"
	type figures struct{ total, payloadUnits, readUnits float64 }
	measure := func(t *testing.T, payload []byte, inline bool) figures {
		log := &capacityLog{}
		store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
		if inline {
			dynamostore.KeepPayloadsInline(store)
		}
		urls := testenv.NewQueues(t, sqsClient, sqsqueue.DefaultSpec(time.Minute))
		reg := jobs.NewRegistry()
		type upload struct {
			Objects []json.RawMessage `json:"objects"`
		}
		type done = jobs.JSON[map[string]int]
		jobs.MustRegister(reg, "ingest", func(ctx context.Context, j *jobs.Job[upload]) (done, error) {
			if err := j.Publish(ctx, done{V: map[string]int{"done": len(j.Payload.Objects) / 2}}); err != nil {
				return done{}, err
			}
			if err := j.Heartbeat(ctx); err != nil {
				return done{}, err
			}
			return done{V: map[string]int{"done": len(j.Payload.Objects)}}, nil
		}, &jobs.KindOpts{Heartbeat: time.Minute})
		c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: sqsqueue.New(sqsClient, urls.Queue), MessageFirst: true, CancelCheck: -1})
		if err != nil {
			t.Fatal(err)
		}
		id := runOne(t, c, sqsClient, urls.Queue, owner, "ingest", payload)
		var f figures
		for _, op := range log.order {
			if op != "get" && op != "get_payload" {
				f.total += log.table[op] + log.index[op]
			}
		}
		f.payloadUnits, f.readUnits = log.table["payload"], log.table["get_payload"]
		if !inline {
			for _, op := range []string{"claim", "publish", "heartbeat", "finish"} {
				if log.calls[op] == 0 || log.table[op] != float64(log.calls[op]) {
					t.Errorf("%d B payload: %d writes (%s) wrote %g table units, want 1 each", len(payload), log.calls[op], op, log.table[op])
				}
			}
		}
		wantSucceeded(t, c, owner, id, payload) // GET reads the payload's item too: after the figures
		return f
	}
	var report strings.Builder
	fmt.Fprintf(&report, "\n| payload | write units per job, inline (before) | with payload items | of which the payload's item | read units at the claim |\n|---|---|---|---|---|\n")
	var small figures
	for i, size := range []struct {
		name string
		n    int
	}{{"40 B", 40}, {"1.2 KB", 1200}, {"10 KB", 10 << 10}, {"100 KB", 100 << 10}} {
		payload := uploadsPayload(size.n)
		before, after := measure(t, payload, true), measure(t, payload, false)
		fmt.Fprintf(&report, "| %s | %g | %g | %g | %g |\n", size.name, before.total, after.total, after.payloadUnits, after.readUnits)
		if i == 0 {
			small = after
		}
		if extra := after.total - small.total; extra != after.payloadUnits {
			t.Errorf("%s payload: %g write units more than a 40 B one, want only its item's %g", size.name, extra, after.payloadUnits)
		}
		switch size.n {
		case 40:
			if after.payloadUnits != 0 || after.total != before.total {
				t.Errorf("40 B payload: an item of its own (%g units), or %g units against %g inline", after.payloadUnits, after.total, before.total)
			}
		case 1200:
			if after.payloadUnits != 1 {
				t.Errorf("1.2 KB payload: its item took %g write units, want 1", after.payloadUnits)
			}
		}
	}
	t.Log(report.String())
}

// TestUnitsPerRoutedS3Job measures a job made from an S3 event
// notification (aws-lambda-go's sample record, in testdata) end to end:
// the worker makes the job from the message, claims it and records its
// outcome, on DynamoDB Local. Its payload (the record, about 0.9 KB) goes
// in an item of its own: the job costs at most 2 write units more than a
// plain one made the same way.
func TestUnitsPerRoutedS3Job(t *testing.T) {
	client := testenv.DynamoDB(t)
	body, err := os.ReadFile("testdata/s3-event.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.S3Event
	if err := json.Unmarshal(body, &ev); err != nil || len(ev.Records) != 1 {
		t.Fatalf("the sample: %d records, %v", len(ev.Records), err)
	}
	plain := []byte(`{"kind":"plain","payload":{}}`)
	units := map[string]float64{}
	for name, msg := range map[string][]byte{"s3": body, "plain": plain} {
		log := &capacityLog{}
		store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "thumbnail", func(context.Context, *jobs.Job[events.S3EventRecord]) (jobs.NoResult, error) {
			return jobs.NoResult{}, nil
		}, nil)
		jobs.MustRegister(reg, "plain", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
		c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, MessageFirst: true, CancelCheck: -1,
			Routes: &jobs.Routes{S3: []jobs.S3Route{{Bucket: ev.Records[0].S3.Bucket.Name, Kind: "thumbnail", Owner: "arn:aws:iam::123456789012:role/uploads"}},
				Envelope: []jobs.EnvelopeRoute{{Kinds: []string{"plain"}, Owner: "arn:aws:iam::123456789012:role/uploads"}}}})
		if err != nil {
			t.Fatal(err)
		}
		resp, _ := c.Worker().HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-" + name, Body: string(msg)}}})
		if len(resp.BatchItemFailures) > 0 {
			t.Fatalf("%s: batch item failures %v", name, resp.BatchItemFailures)
		}
		for _, op := range log.order {
			if op != "get" && op != "get_payload" {
				units[name] += log.table[op] + log.index[op]
			}
		}
		t.Logf("%s job: %g write units (%v)", name, units[name], log.table)
	}
	if extra := units["s3"] - units["plain"]; extra > 2 {
		t.Errorf("a routed S3 job costs %g write units more than a plain one, want at most 2", extra)
	}
}

// longOwner is the longest owner an IAM-authorized caller has: an assumed
// role's session ARN with a role name and a session name of 64
// characters each, the longest IAM allows.
var longOwner = "arn:aws:sts::123456789012:assumed-role/" + strings.Repeat("r", 64) + "/" + strings.Repeat("s", 64)

// TestInlinePayloadLimit computes the largest payload a plain job keeps in
// its own item (of a 32-character kind, from longOwner), checks it against
// DynamoDB Local's own count (the job's claim, the largest write of its
// life before a result, costs 1 write unit at that size; a few bytes more
// would cost 2), and holds dynamostore's package comment and
// docs/evidence/CAPACITY.md to it.
func TestInlinePayloadLimit(t *testing.T) {
	client := testenv.DynamoDB(t)
	ctx := context.Background()
	kind := "orders.receipts.send-" + strings.Repeat("x", 11)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, kind, func(context.Context, *jobs.Job[map[string]string]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	log := &capacityLog{}
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	inline := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	dynamostore.KeepPayloadsInline(inline)
	payload := func(n int) []byte { return []byte(`{"t":"` + strings.Repeat("a", n-8) + `"}`) }
	// enqueue stores a job of an n-byte payload in s, and claims it when
	// it is inline: its ref, and the claim's table units.
	enqueue := func(s *dynamostore.Store, n int) (string, float64) {
		c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: s})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Service().Enqueue(ctx, jobs.EnqueueRequest{Owner: longOwner, Kind: kind, Payload: payload(n)})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.Get(ctx, res.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.PayloadRef != "" {
			return rec.PayloadRef, 0
		}
		before := log.table["claim"]
		if _, err := s.Claim(ctx, rec.ID, driver.Claim{Token: wire.NewID(), At: time.Now(), LeaseUntil: time.Now().Add(15 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		return "", log.table["claim"] - before
	}
	// The limit moves by a few bytes from job to job (a list shard has one
	// digit or two, a timestamp's trailing zeros are not stored): the
	// smallest of several jobs' is the one a job can count on.
	lo := 1024
	for range 6 {
		in, apart := 16, 1024
		for apart-in > 1 {
			mid := (in + apart) / 2
			if ref, _ := enqueue(store, mid); ref == "" {
				in = mid
			} else {
				apart = mid
			}
		}
		lo = min(lo, in)
	}
	// The limit is the least of six jobs': the next job's may be a byte
	// less (its shard, its timestamp), putting a payload of lo apart. The
	// first job that keeps it inline must claim for 1 unit.
	inlined := false
	for range 10 {
		ref, units := enqueue(store, lo)
		if ref != "" {
			continue
		}
		inlined = true
		if units != 1 {
			t.Errorf("the largest inline payload (%d B): its claim wrote %g units, want 1", lo, units)
		}
		break
	}
	if !inlined {
		t.Errorf("no job of 10 kept a payload of %d B inline", lo)
	}
	// Kept inline anyway, a payload this much larger makes the claim cost
	// 2: the limit leaves no more than the room a run's sweep entry and a
	// retry's failure code and dispatch count take (about 100 bytes).
	if _, units := enqueue(inline, lo+100); units != 2 {
		t.Errorf("a %d B payload kept inline: its claim wrote %g units, want 2 (the limit, %d B, wastes room)", lo+100, units, lo)
	}
	t.Logf("inline payload limit with a %d-character owner and a %d-character kind: %d bytes", len(longOwner), len(kind), lo)
	for _, doc := range []struct{ path, pattern string }{
		{"schema.go", `up to (\d+) bytes of payload`},
		{"../../../docs/evidence/CAPACITY.md", `keeps a payload of up to \*\*(\d+)\*\* bytes in its job's item`},
	} {
		b, err := os.ReadFile(doc.path)
		if err != nil {
			t.Fatal(err)
		}
		// Lines folded: a comment's "//" and all whitespace runs are one space.
		folded := regexp.MustCompile(`\s+(//\s*)?`).ReplaceAll(b, []byte(" "))
		m := regexp.MustCompile(doc.pattern).FindSubmatch(folded)
		if m == nil {
			t.Errorf("%s no longer states the inline limit as %q", doc.path, doc.pattern)
		} else if stated, _ := strconv.Atoi(string(m[1])); stated > lo || stated < lo-8 {
			t.Errorf("%s states an inline limit of %d bytes; measured %d (within 8 bytes below it, it holds for every job)", doc.path, stated, lo)
		}
	}
}

// TestWriteUnitsPerLargeResult measures a final write with a 10 KB result
// (a list of uploaded objects: it compresses) and the clear of the job's
// post-outcome steps after it, with the result in an item of its own and,
// as before result items, in the job's item. docs/evidence/CAPACITY.md records the
// figures.
func TestWriteUnitsPerLargeResult(t *testing.T) {
	client := testenv.DynamoDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	result := uploadsPayload(10 << 10)
	measure := func(inline bool) (finish, after float64) {
		log := &capacityLog{}
		store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
		if inline {
			dynamostore.KeepPayloadsInline(store)
		}
		rec := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		expires := now.Add(time.Hour)
		if err := store.Finish(ctx, rec.ID, "a", driver.Outcome{Status: jobs.StatusSucceeded, Result: result, ResultUntil: expires, At: now, ExpiresAt: expires,
			After: []string{"event"}}); err != nil {
			t.Fatal(err)
		}
		got, err := store.Get(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if r, _, err := store.ReadPart(ctx, got, driver.PartResult); err != nil || string(r) != string(result) {
			t.Fatalf("inline %v: the result reads back as %d bytes, %v", inline, len(r), err)
		}
		if err := store.DoneAfter(ctx, rec.ID, driver.AfterOfRecord(got)); err != nil {
			t.Fatal(err)
		}
		return log.table["finish"] + log.table["result_item"], log.table["done_after"]
	}
	finishInline, afterInline := measure(true)
	finish, after := measure(false)
	t.Logf("a 10 KB result: the final write %g table units (in the job's item: %g), the steps' clear after it %g (%g)", finish, finishInline, after, afterInline)
	if after != 1 || finish >= finishInline {
		t.Errorf("with a result item: final write %g (inline %g), the clear after it %g; want less than inline, and 1", finish, finishInline, after)
	}
}
