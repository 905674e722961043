package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// TestALosingCreateKeepsTheWinnersPayloadTTL: a create that loses (the id
// is taken: an idempotency key reused, a duplicate) puts the same payload
// under the same key first; it must not shorten the winner's item's TTL.
func TestALosingCreateKeepsTheWinnersPayloadTTL(t *testing.T) {
	client := testenv.DynamoDB(t)
	clock := jobstest.NewClock(time.Now())
	s := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{Clock: clock})
	ctx := context.Background()
	big := []byte(`{"text":"` + strings.Repeat("p", 3000) + `"}`)
	rec := jobstest.NewRecord(wire.NewID(), clock.Now())
	rec.Payload, rec.PayloadUntil = big, clock.Now().Add(90*24*time.Hour) // a job due in 60 days
	if err := s.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	again := jobstest.NewRecord(rec.ID, clock.Now())
	again.Payload, again.PayloadUntil = big, clock.Now().Add(22*24*time.Hour) // the same key, due now: refused
	var ce *driver.ConflictError
	if err := s.Create(ctx, again); !errors.As(err, &ce) {
		t.Fatalf("second create: %v, want a conflict", err)
	}
	got, _ := s.Get(ctx, rec.ID)
	_, until, err := s.ReadPart(ctx, got, driver.PartPayload)
	if err != nil || until.Before(rec.PayloadUntil.Truncate(time.Second)) {
		t.Fatalf("the live job's payload item now expires %v (%v); want at least %v", until, err, rec.PayloadUntil)
	}
}

// TestASealedPayloadNearTheLimitRuns: a payload the service accepted (at
// most MaxPayloadBytes once canonical) grows when its secret field is
// sealed; compressed into its own item, it must still read back whole (an
// inflate bounded at MaxPayloadBytes refused it, and the worker parked the
// job on "store" at every delivery, for ever).
func TestASealedPayloadNearTheLimitRuns(t *testing.T) {
	client := testenv.DynamoDB(t)
	clock := jobstest.NewClock(time.Now())
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{Clock: clock})
	key := make([]byte, 32)
	rand.Read(key)
	sealer, err := jobs.NewAESSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	type doc struct {
		Body string `json:"body" jobs:"secret"`
	}
	reg := jobs.NewRegistry()
	ran := false
	jobs.MustRegister(reg, "doc", func(_ context.Context, j *jobs.Job[doc]) (jobs.NoResult, error) {
		ran = true
		return jobs.NoResult{}, nil
	}, nil)
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Sealer: sealer, Clock: clock, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 90<<10)
	rand.Read(raw)
	payload, _ := json.Marshal(doc{Body: base64.StdEncoding.EncodeToString(raw)}) // ~120 KB, under the 128 KiB limit
	ctx := context.Background()
	res, err := c.Service().Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "doc", Payload: payload})
	if err != nil {
		t.Fatalf("enqueue of %d bytes: %v", len(payload), err)
	}
	for range 3 {
		c.Worker().HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: message.Encode(res.Job.ID)}}})
		clock.Advance(31 * time.Minute)
	}
	got, _ := store.Get(ctx, res.Job.ID)
	if _, _, perr := store.ReadPart(ctx, got, driver.PartPayload); perr != nil {
		t.Logf("Payload: %v", perr)
	}
	if !ran || got.Status != jobs.StatusSucceeded {
		t.Fatalf("a %d-byte payload (accepted): job %s waiting on %q, attempt %d, ran %v; want it run", len(payload), got.Status, got.WaitingOn, got.Attempt, ran)
	}
}
