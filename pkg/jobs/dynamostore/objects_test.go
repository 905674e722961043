package dynamostore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/s3objects"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// objectsRig is a store with an object tier on fauxqs's S3.
type objectsRig struct {
	store  *dynamostore.Store
	s3     *s3.Client
	bucket string
	clock  *jobstest.Clock
}

func newObjectsRig(t *testing.T) *objectsRig {
	client := testenv.DynamoDB(t)
	s3c := testenv.S3(t)
	bucket := testenv.NewBucket(t, s3c)
	clock := jobstest.NewClock(time.Now())
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{Clock: clock, Objects: s3objects.New(s3c, bucket)})
	return &objectsRig{store: store, s3: s3c, bucket: bucket, clock: clock}
}

// objects lists the keys under the job's prefix in the bucket.
func (r *objectsRig) objects(t *testing.T, id string) []string {
	t.Helper()
	out, err := r.s3.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &r.bucket})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		if strings.Contains(*o.Key, "/"+id+"/") {
			keys = append(keys, *o.Key)
		}
	}
	return keys
}

// randomJSON is a JSON string payload of n bytes that does not compress.
func randomJSON(t *testing.T, n int) []byte {
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return []byte(`{"blob":"` + hex.EncodeToString(b)[:n-11] + `"}`)
}

// TestLargePartsAreObjects: a payload and a final result whose stored form
// passes the threshold rest in S3, not in items: the job's item names them
// and holds their sizes, a claim reads the payload whole, KeepPart makes
// the object last longer, and PartURL links the result. A part under the
// threshold stays in an item.
func TestLargePartsAreObjects(t *testing.T) {
	r := newObjectsRig(t)
	ctx := context.Background()
	payload := randomJSON(t, 300<<10) // 300 KB, beyond an item's compressed budget
	rec := jobstest.NewRecord(wire.NewID(), r.clock.Now())
	rec.Payload, rec.PayloadUntil = payload, r.clock.Now().Add(23*24*time.Hour)
	if err := r.store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := r.store.Get(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.PayloadBytes != len(payload) || got.PayloadRef == "" || len(got.Payload) != 0 {
		t.Fatalf("a 300 KB payload: bytes %d, ref %q, %d bytes inline; want an object of %d", got.PayloadBytes, got.PayloadRef, len(got.Payload), len(payload))
	}
	keys := r.objects(t, rec.ID)
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "parts/") {
		t.Fatalf("objects of the job: %v, want one under parts/", keys)
	}
	raw, err := r.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: &r.bucket, Key: &keys[0]})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(raw.Body)
	if !bytes.Equal(body, payload) || raw.Metadata["lj-until"] == "" {
		t.Fatalf("the object holds %d bytes (metadata %v), want the payload's %d and how long it lasts", len(body), raw.Metadata, len(payload))
	}

	claimed, err := r.store.Claim(ctx, rec.ID, driver.Claim{Token: "t1", At: r.clock.Now(), LeaseUntil: r.clock.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	read, until, err := r.store.ReadPart(ctx, claimed, driver.PartPayload)
	if err != nil || !bytes.Equal(read, payload) {
		t.Fatalf("the claim read %d bytes (%v), want the payload's %d", len(read), err, len(payload))
	}
	if until.Before(rec.PayloadUntil.Truncate(time.Second)) {
		t.Fatalf("the object lasts until %v, want at least %v", until, rec.PayloadUntil)
	}
	later := r.clock.Now().Add(200 * 24 * time.Hour)
	if err := r.store.KeepPart(ctx, claimed, driver.PartPayload, later); err != nil {
		t.Fatal(err)
	}
	if _, until, err := r.store.ReadPart(ctx, claimed, driver.PartPayload); err != nil || until.Before(later.Truncate(time.Second)) {
		t.Fatalf("after KeepPart to %v the object lasts until %v (%v)", later, until, err)
	}

	result := randomJSON(t, 20<<20) // 20 MB: written in parts
	if err := r.store.Finish(ctx, rec.ID, "t1", driver.Outcome{Status: jobs.StatusSucceeded, Result: result, At: r.clock.Now(),
		ResultUntil: r.clock.Now().Add(7 * 24 * time.Hour), ExpiresAt: r.clock.Now().Add(7 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	done, err := r.store.Get(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.ResultBytes != len(result) || len(done.Result) != 0 {
		t.Fatalf("a 20 MB result: bytes %d, %d inline; want an object", done.ResultBytes, len(done.Result))
	}
	link, err := r.store.PartURL(ctx, done, driver.PartResult, time.Minute)
	if err != nil || !strings.Contains(link, "X-Amz-Expires=60") {
		t.Fatalf("the result's link: %q (%v), want one presigned for a minute", link, err)
	}
	// fauxqs checks no signature: the link is fetched as a caller would.
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	fetched, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(fetched, result) {
		t.Fatalf("fetching the link: %d, %d bytes; want 200 and the result's %d", resp.StatusCode, len(fetched), len(result))
	}

	small := jobstest.NewRecord(wire.NewID(), r.clock.Now())
	small.Payload = []byte(`{"text":"` + strings.Repeat("a", 3000) + `"}`) // compresses far under the threshold
	if err := r.store.Create(ctx, small); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.store.Get(ctx, small.ID); got.PayloadBytes != 0 || got.PayloadRef == "" || len(r.objects(t, small.ID)) != 0 {
		t.Fatalf("a 3 KB payload that compresses: bytes %d, ref %q, objects %v; want an item of its own", got.PayloadBytes, got.PayloadRef, r.objects(t, small.ID))
	}
}

// TestATransactionRefusesAPayloadObject: a transaction cannot write an
// object, so a payload that would be one is refused before anything is
// written; one without an object tier past an item's bound is refused
// too, and nothing is stored.
func TestATransactionRefusesAPayloadObject(t *testing.T) {
	r := newObjectsRig(t)
	rec := jobstest.NewRecord(wire.NewID(), r.clock.Now())
	rec.Payload = randomJSON(t, 64<<10)
	if _, err := r.store.TransactPut(rec); !errors.Is(err, dynamostore.ErrNeedsObject) {
		t.Fatalf("TransactPut of a 64 KB payload: %v, want ErrNeedsObject", err)
	}
	client := testenv.DynamoDB(t)
	plain := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{Clock: r.clock})
	huge := jobstest.NewRecord(wire.NewID(), r.clock.Now())
	huge.Payload = randomJSON(t, 1<<20) // hex: about 500 KB once compressed
	if err := plain.Create(context.Background(), huge); !errors.Is(err, dynamostore.ErrNeedsObject) {
		t.Fatalf("Create of 1 MB without an object tier: %v, want ErrNeedsObject", err)
	}
	if _, err := plain.Get(context.Background(), huge.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("after the refusal: %v, want no job", err)
	}
}

// countingDoer counts an S3 client's requests by method.
type countingDoer struct {
	mu  sync.Mutex
	n   map[string]int
	out *http.Client
}

func (c *countingDoer) Do(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	op := r.Method
	if r.Header.Get("X-Amz-Copy-Source") != "" {
		op = "COPY"
	}
	c.n[op]++
	c.mu.Unlock()
	return c.out.Do(r)
}

// TestUnitsAndRequestsPerObject measures a job whose payload and result
// are S3 objects, end to end through Service.Enqueue (message first), the
// SQS emulator and the worker on DynamoDB Local: the table's write units
// are a small job's, and S3 adds a PUT for each part and a GET at the
// claim. docs/evidence/CAPACITY.md records the table this prints.
func TestUnitsAndRequestsPerObject(t *testing.T) {
	client, sqsClient := testenv.DynamoDB(t), testenv.SQS(t)
	owner := "arn:aws:sts::123456789012:assumed-role/ingest-pipeline-production/i-0abcdef1234567890"
	var report strings.Builder
	fmt.Fprintf(&report, "\n| payload | result | write units per job | S3 PUTs | S3 GETs (the claim) |\n|---|---|---|---|---|\n")
	small := -1.0
	for _, tc := range []struct {
		name, result string
		payload      int
		resultBytes  int
	}{{"40 B", "20 B", 40, 0}, {"100 KB", "20 B", 100 << 10, 0}, {"1 MB", "1 MB", 1 << 20, 1 << 20}, {"40 B", "1 MB", 40, 1 << 20}} {
		log := &capacityLog{}
		doer := &countingDoer{n: map[string]int{}, out: http.DefaultClient}
		s3c := localaws.S3Client(testenv.SQSEndpoint(t), func(o *s3.Options) { o.HTTPClient = doer })
		bucket := testenv.NewBucket(t, testenv.S3(t))
		store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record, Objects: s3objects.New(s3c, bucket)})
		urls := testenv.NewQueues(t, sqsClient, sqsqueue.DefaultSpec(time.Minute))
		reg := jobs.NewRegistry()
		type upload struct {
			Objects []json.RawMessage `json:"objects"`
		}
		fill := strings.Repeat("r", tc.resultBytes)
		jobs.MustRegister(reg, "ingest", func(ctx context.Context, j *jobs.Job[upload]) (jobs.JSON[map[string]any], error) {
			return jobs.JSON[map[string]any]{V: map[string]any{"done": len(j.Payload.Objects), "fill": randomHex(len(fill))}}, nil
		}, &jobs.KindOpts{MaxPayloadBytes: 4 << 20, MaxResultBytes: 4 << 20})
		c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: sqsqueue.New(sqsClient, urls.Queue), MessageFirst: true, CancelCheck: -1})
		if err != nil {
			t.Fatal(err)
		}
		payload := uploadsPayload(tc.payload)
		runOne(t, c, sqsClient, urls.Queue, owner, "ingest", payload)
		var units float64
		for _, op := range log.order {
			if op != "get" {
				units += log.table[op] + log.index[op]
			}
		}
		doer.mu.Lock()
		puts, gets := doer.n["PUT"]+doer.n["POST"], doer.n["GET"]
		doer.mu.Unlock()
		fmt.Fprintf(&report, "| %s | %s | %g | %d | %d |\n", tc.name, tc.result, units, puts, gets)
		if small < 0 {
			small = units
		}
		wantPuts, wantGets := 0, 0
		if tc.payload > 8<<10 {
			wantPuts, wantGets = 1, 1
		}
		if tc.resultBytes > 0 {
			wantPuts++
		}
		if units != small || puts != wantPuts || gets != wantGets {
			t.Errorf("%s payload, %s result: %g write units, %d PUTs, %d GETs; want a small job's %g, %d and %d", tc.name, tc.result, units, puts, gets, small, wantPuts, wantGets)
		}
	}
	t.Log(report.String())
}

// randomHex is n characters of random hex: a result that does not shrink.
func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// TestAStagedResultIsNamedNotWritten: a result staged ahead of its final
// write (StageResult) is an object already; the final write only names
// it, with no request to S3, and a result that stays in items stages
// nothing.
func TestAStagedResultIsNamedNotWritten(t *testing.T) {
	client := testenv.DynamoDB(t)
	doer := &countingDoer{n: map[string]int{}, out: http.DefaultClient}
	s3c := localaws.S3Client(testenv.SQSEndpoint(t), func(o *s3.Options) { o.HTTPClient = doer })
	bucket := testenv.NewBucket(t, testenv.S3(t))
	clock := jobstest.NewClock(time.Now())
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{Clock: clock, Objects: s3objects.New(s3c, bucket)})
	ctx := context.Background()
	if st, err := store.StageResult(ctx, "x", []byte(`{"n":1}`), clock.Now().Add(time.Hour)); err != nil || st != (driver.Staged{}) {
		t.Fatalf("a small result staged %+v (%v)", st, err)
	}
	rec := jobstest.NewRecord(wire.NewID(), clock.Now())
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	result := randomJSON(t, 64<<10)
	until := clock.Now().Add(7 * 24 * time.Hour)
	st, err := store.StageResult(ctx, rec.ID, result, until)
	if err != nil || st.Bytes != len(result) || st.Ref == "" {
		t.Fatalf("staging a 64 KB result: %+v (%v)", st, err)
	}
	doer.mu.Lock()
	before := doer.n["PUT"]
	doer.mu.Unlock()
	if err := store.Finish(ctx, rec.ID, "t", driver.Outcome{Status: jobs.StatusSucceeded, Result: result, Staged: st, At: clock.Now(), ResultUntil: until, ExpiresAt: until}); err != nil {
		t.Fatal(err)
	}
	doer.mu.Lock()
	after := doer.n["PUT"]
	doer.mu.Unlock()
	got, _ := store.Get(ctx, rec.ID)
	read, _, err := store.ReadPart(ctx, got, driver.PartResult)
	if after != before || got.ResultBytes != len(result) || got.ResultRef != st.Ref || err != nil || !bytes.Equal(read, result) {
		t.Fatalf("the final write made %d PUTs; the job names %q (%d bytes), reads %d bytes (%v); want none and the staged object", after-before, got.ResultRef, got.ResultBytes, len(read), err)
	}
}

// TestUnitsAndRequestsPerUpload measures an upload (POST /v1/uploads
// through its job's validation) and the job enqueued from it, end to end
// on DynamoDB Local, the SQS emulator and fauxqs's S3: the table's write
// units and our S3 requests by method (the caller's PUTs of the parts are
// the caller's, not counted). The job from an upload costs the table no
// more than a job with the same payload enqueued directly, and S3 a HEAD
// at its creation (the staged payload lasts as long as the job's already)
// where the direct one has its PUTs. docs/evidence/CAPACITY.md, "Uploads",
// records the table this prints.
func TestUnitsAndRequestsPerUpload(t *testing.T) {
	client, sqsClient := testenv.DynamoDB(t), testenv.SQS(t)
	ctx := context.Background()
	owner := "arn:aws:sts::123456789012:assumed-role/ingest-pipeline-production/i-0abcdef1234567890"
	sealer, err := jobs.NewAESSealer([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	fmt.Fprintf(&report, "\n| payload | phase | write units | S3 requests (ours) |\n|---|---|---|---|\n")
	for _, size := range []int{1 << 20, 10 << 20} {
		log := &capacityLog{}
		doer := &countingDoer{n: map[string]int{}, out: http.DefaultClient}
		s3c := localaws.S3Client(testenv.SQSEndpoint(t), func(o *s3.Options) { o.HTTPClient = doer })
		bucket := testenv.NewBucket(t, testenv.S3(t))
		store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record, Objects: s3objects.New(s3c, bucket)})
		urls := testenv.NewQueues(t, sqsClient, sqsqueue.DefaultSpec(time.Minute))
		reg := jobs.NewRegistry()
		type upload struct {
			Objects []json.RawMessage `json:"objects"`
		}
		jobs.MustRegister(reg, "ingest", func(ctx context.Context, j *jobs.Job[upload]) (jobs.JSON[int], error) {
			return jobs.JSON[int]{V: len(j.Payload.Objects)}, nil
		}, &jobs.KindOpts{MaxPayloadBytes: 16 << 20})
		c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: sqsqueue.New(sqsClient, urls.Queue), MessageFirst: true, CancelCheck: -1, Sealer: sealer})
		if err != nil {
			t.Fatal(err)
		}
		drain := func() {
			t.Helper()
			for range 5 {
				out, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &urls.Queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
				if err != nil {
					t.Fatal(err)
				}
				if len(out.Messages) == 0 {
					return
				}
				var ev events.SQSEvent
				for _, m := range out.Messages {
					ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body})
					if _, err := sqsClient.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &urls.Queue, ReceiptHandle: m.ReceiptHandle}); err != nil {
						t.Fatal(err)
					}
				}
				if resp, _ := c.Worker().HandleSQS(ctx, ev); len(resp.BatchItemFailures) > 0 {
					t.Fatalf("batch item failures %v", resp.BatchItemFailures)
				}
			}
		}
		counts := func() (float64, string) {
			var units float64
			for _, op := range log.order {
				if op != "get" {
					units += log.table[op] + log.index[op]
				}
			}
			doer.mu.Lock()
			defer doer.mu.Unlock()
			var parts []string
			for _, m := range []string{"POST", "PUT", "COPY", "HEAD", "GET", "DELETE"} {
				if n := doer.n[m]; n > 0 {
					parts = append(parts, fmt.Sprintf("%d %s", n, m))
				}
			}
			*log = capacityLog{}
			doer.n = map[string]int{}
			return units, strings.Join(parts, ", ")
		}

		payload := uploadsPayload(size)
		up, err := c.Service().StartUpload(ctx, owner, "ingest", len(payload))
		if err != nil {
			t.Fatal(err)
		}
		drain() // the upload's job runs, and waits for its completion
		var etags []string
		for i, p := range up.Parts {
			chunk := payload[i*up.PartBytes : min((i+1)*up.PartBytes, len(payload))]
			req, _ := http.NewRequest(http.MethodPut, p.URL, bytes.NewReader(chunk))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			etags = append(etags, resp.Header.Get("ETag"))
		}
		if _, err := c.Service().CompleteUpload(ctx, owner, up.ID, etags); err != nil {
			t.Fatal(err)
		}
		drain()
		v, err := c.Service().GetUpload(ctx, owner, up.ID)
		if err != nil || v.Status != "ready" {
			t.Fatalf("the upload: %+v, %v", v, err)
		}
		uploadUnits, uploadS3 := counts()
		res, err := c.Service().Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: "ingest", Upload: up.ID})
		if err != nil {
			t.Fatal(err)
		}
		drain()
		got, err := c.Service().Get(ctx, owner, res.Job.ID)
		if err != nil || got.Status != jobs.StatusSucceeded {
			t.Fatalf("the job: %+v, %v", got, err)
		}
		jobUnits, jobS3 := counts()
		runOne(t, c, sqsClient, urls.Queue, owner, "ingest", payload)
		directUnits, directS3 := counts()
		name := fmt.Sprintf("%d MiB", size>>20)
		fmt.Fprintf(&report, "| %s | the upload | %g | %s |\n| %s | its job | %g | %s |\n| %s | the same job enqueued directly | %g | %s |\n",
			name, uploadUnits, uploadS3, name, jobUnits, jobS3, name, directUnits, directS3)
		if jobUnits > directUnits {
			t.Errorf("%s: the upload's job took %g write units, the same job enqueued directly %g", name, jobUnits, directUnits)
		}
		if jobS3 != "1 HEAD, 1 GET" {
			t.Errorf("%s: the upload's job made %s of S3, want a HEAD at its creation and the GET of its claim", name, jobS3)
		}
	}
	t.Log(report.String())
}
