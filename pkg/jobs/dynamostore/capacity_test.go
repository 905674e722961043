package dynamostore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// capacityLog sums the consumed capacity DynamoDB reports, per operation.
type capacityLog struct {
	mu    sync.Mutex
	table map[string]float64
	index map[string]float64
	calls map[string]int
	order []string
}

func (c *capacityLog) record(op string, cc *types.ConsumedCapacity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.table == nil {
		c.table, c.index = map[string]float64{}, map[string]float64{}
	}
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
	if _, seen := c.table[op]; !seen {
		c.order = append(c.order, op)
	}
	if cc.Table != nil {
		c.table[op] += aws.ToFloat64(cc.Table.CapacityUnits)
	} else {
		c.table[op] += aws.ToFloat64(cc.CapacityUnits)
	}
	var index float64
	for _, g := range cc.GlobalSecondaryIndexes {
		index += aws.ToFloat64(g.CapacityUnits)
	}
	if op == "list" && index < 0.5 {
		// DynamoDB bills a query at least half a read unit (eventually
		// consistent) even when it finds nothing; DynamoDB Local reports 0.
		index = 0.5
	}
	c.index[op] += index
}

// TestWriteUnitsPerJob measures, from DynamoDB's own ReturnConsumedCapacity,
// the write units one job costs over its life (create, claim, one publish,
// finish), for a small job, for the largest job whose item still fits in
// 1 KB, and for one whose payload goes in an item of its own.
// docs/evidence/CAPACITY.md records the table this prints; the assertions pin the
// figures so a change that adds a write or an index update fails here.
func TestWriteUnitsPerJob(t *testing.T) {
	client := testenv.DynamoDB(t)
	cases := []struct {
		name      string
		payload   []byte
		wantTotal float64
	}{
		{"small job (40 B payload)", []byte(`{"text":"` + strings.Repeat("a", 40-12) + `"}`), 11},
		{"1 KB item (520 B payload)", []byte(`{"text":"` + strings.Repeat("a", 520-12) + `"}`), 11},
		{"1.6 KB payload, in an item of its own", uploadsPayload(1600), 12},
	}
	var report strings.Builder
	fmt.Fprintf(&report, "\n| job | create | payload item | claim | publish | finish | total WRU | of which index |\n|---|---|---|---|---|---|---|---|\n")
	for _, tc := range cases {
		log := &capacityLog{}
		store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
		ctx := context.Background()
		now := time.Now().Truncate(time.Millisecond)
		rec := &driver.Record{
			ID: wire.NewID(), Kind: "example.hash", Owner: "arn:aws:iam::123456789012:user/alice", Status: jobs.StatusQueued,
			Payload:     tc.payload,
			RequestHash: "0123456789abcdef0123456789abcdef",
			CreatedAt:   now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute), PayloadUntil: now.Add(30 * 24 * time.Hour),
		}
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		token := wire.NewID()
		if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: token, At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := store.Publish(ctx, rec.ID, token, []byte(`{"rounds_done":500000}`), now); err != nil {
			t.Fatal(err)
		}
		if err := store.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`{"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}`), At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		var total, index float64
		cell := func(op string) string {
			total += log.table[op] + log.index[op]
			index += log.index[op]
			if log.index[op] > 0 {
				return fmt.Sprintf("%g + %g index", log.table[op], log.index[op])
			}
			return fmt.Sprintf("%g", log.table[op])
		}
		fmt.Fprintf(&report, "| %s | %s | %s | %s | %s | %s | **%g** | %g |\n", tc.name, cell("create"), cell("payload"), cell("claim"), cell("publish"), cell("finish"), total, index)
		if total != tc.wantTotal {
			t.Errorf("%s: %g write units per job, want %g", tc.name, total, tc.wantTotal)
		}
		if index != 7 {
			t.Errorf("%s: %g index write units, want 7 (the sweep index in at create and out at finish, the owner index at create, "+
				"the queued index in at create and out at the claim, the running index in at the claim and out at finish)", tc.name, index)
		}
	}
	t.Log(report.String())
}

// TestWriteUnitsPerTransactionalEnqueue measures the job's share of a
// caller's TransactWriteItems: the put of a job (its item and index
// entries, and its payload's item when it has one) costs twice the units
// of the same job's plain create, as every transactional write does.
func TestWriteUnitsPerTransactionalEnqueue(t *testing.T) {
	client := testenv.DynamoDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	for _, tc := range []struct {
		name    string
		payload []byte
		puts    int
	}{
		{"a small job", []byte(`{"order_id":"o-1042","email":"ada@example.com","cents":4999}`), 1},
		{"a job with a 10 KB payload", uploadsPayload(10 << 10), 2},
	} {
		newRec := func() *driver.Record {
			return &driver.Record{
				ID: wire.NewID(), Kind: "example.receipt", Owner: "arn:aws:iam::123456789012:role/shop", Status: jobs.StatusQueued,
				Payload: tc.payload, RequestHash: "0123456789abcdef0123456789abcdef",
				CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute), PayloadUntil: now.Add(30 * 24 * time.Hour),
			}
		}
		log := &capacityLog{}
		plainStore := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
		if err := plainStore.Create(ctx, newRec()); err != nil {
			t.Fatal(err)
		}
		var plain float64
		for _, op := range log.order {
			plain += log.table[op] + log.index[op]
		}
		store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{})
		rec := newRec()
		puts, err := store.TransactPut(rec)
		if err != nil {
			t.Fatal(err)
		}
		if len(puts) != tc.puts {
			t.Fatalf("%s: %d writes, want %d", tc.name, len(puts), tc.puts)
		}
		out, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems:          puts,
			ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes,
		})
		if err != nil {
			t.Fatal(err)
		}
		var tbl, idx float64
		for _, cc := range out.ConsumedCapacity {
			if cc.Table != nil {
				tbl += aws.ToFloat64(cc.Table.CapacityUnits)
			}
			for _, g := range cc.GlobalSecondaryIndexes {
				idx += aws.ToFloat64(g.CapacityUnits)
			}
		}
		t.Logf("transactional enqueue of %s: %g table + %g index = %g write units (plain create: %g)", tc.name, tbl, idx, tbl+idx, plain)
		if tbl+idx != 2*plain {
			t.Errorf("%s: %g write units, want %g (2 x the plain create)", tc.name, tbl+idx, 2*plain)
		}
		got, err := store.Get(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p, _, err := store.ReadPart(ctx, got, driver.PartPayload); err != nil || string(p) != string(tc.payload) {
			t.Errorf("%s: the stored payload reads back as %.40q, %v", tc.name, p, err)
		}
	}
}

// TestWriteUnitsPerRetryAndCancel measures the write units a retry (the
// requeue, then the next claim) and each kind of cancel add to a small job.
func TestWriteUnitsPerRetryAndCancel(t *testing.T) {
	client := testenv.DynamoDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	newJob := func(log *capacityLog) (*dynamostore.Store, *driver.Record) {
		store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
		rec := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`),
			CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute)}
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return store, rec
	}
	total := func(log *capacityLog, ops ...string) float64 {
		var sum float64
		for _, op := range ops {
			sum += log.table[op] + log.index[op]
		}
		return sum
	}

	retry := &capacityLog{}
	store, rec := newJob(retry)
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	retry.table, retry.index = map[string]float64{}, map[string]float64{} // count from the failed run's end
	if err := store.Requeue(ctx, rec.ID, "a", driver.Requeue{At: now, RunAt: now, SweepAt: now.Add(4 * time.Minute), LastError: "internal_error"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "b", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}

	// Sent first: the job was stored without a sweep entry, and its retry
	// is requeued without one (its new message is its net).
	retryFirst := &capacityLog{}
	store = dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: retryFirst.record})
	rec = &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	retryFirst.table, retryFirst.index = map[string]float64{}, map[string]float64{}
	if err := store.Requeue(ctx, rec.ID, "a", driver.Requeue{At: now, RunAt: now, LastError: "internal_error"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "b", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}

	queued := &capacityLog{}
	store, rec = newJob(queued)
	if err := store.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	cancelRunning := func(log *capacityLog, store *dynamostore.Store, rec *driver.Record) {
		if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		log.table, log.index = map[string]float64{}, map[string]float64{}
		if err := store.RequestCancel(ctx, rec.ID, now); err != nil {
			t.Fatal(err)
		}
		if err := store.Finish(ctx, rec.ID, "a", driver.Outcome{Status: jobs.StatusCancelled, At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	running := &capacityLog{}
	store, rec = newJob(running)
	cancelRunning(running, store, rec)
	// Sent first (no sweep entry): each cancel one unit less.
	unswept := func(log *capacityLog) (*dynamostore.Store, *driver.Record) {
		store, rec := newJob(log)
		// Out of the index as a job sent first is: a claim, and a requeue
		// without a sweep time.
		if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "x", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := store.Requeue(ctx, rec.ID, "x", driver.Requeue{At: now, RunAt: now, Unstart: true}); err != nil {
			t.Fatal(err)
		}
		log.table, log.index = map[string]float64{}, map[string]float64{}
		return store, rec
	}
	queuedFirst := &capacityLog{}
	store, rec = unswept(queuedFirst)
	if err := store.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	runningFirst := &capacityLog{}
	store, rec = unswept(runningFirst)
	cancelRunning(runningFirst, store, rec)
	figures := map[string]float64{
		"retry (requeue + next claim)":              total(retry, "requeue", "claim"),
		"retry sent first (requeue + next claim)":   total(retryFirst, "requeue", "claim"),
		"cancel a queued job (instead of running)":  total(queued, "cancel"),
		"cancel a running job (mark + final write)": total(running, "request_cancel", "finish"),
		"cancel a queued job sent first":            total(queuedFirst, "cancel"),
		"cancel a running job sent first":           total(runningFirst, "request_cancel", "finish"),
	}
	want := map[string]float64{
		"retry (requeue + next claim)":              8, // requeue 1 + sweep key moved 2 + running out 1 + queued in 1, claim 1 + queued out 1 + running in 1
		"retry sent first (requeue + next claim)":   6, // as above, no sweep key to move
		"cancel a queued job (instead of running)":  4, // 1 + sweep entry removed 1 + attention entry 1 + queued entry removed 1
		"cancel a running job (mark + final write)": 5, // mark 1, final write 1 + sweep entry 1 + attention entry 1 + running entry 1
		"cancel a queued job sent first":            3, // as above, no sweep entry to remove
		"cancel a running job sent first":           4,
	}
	for name, got := range figures {
		t.Logf("%s: %g write units", name, got)
		if got != want[name] {
			t.Errorf("%s: %g write units, want %g", name, got, want[name])
		}
	}
}

// TestWriteUnitsPerBatchedJob measures what belonging to a batch adds: the
// final write keeps the job in the sweep index with its count pending; the
// count is one write to the job's shard of the batch (a number set of up to
// 157 indexes, under 1 KB), then the step is cleared (a write, and the
// sweep entry's removal a plain job pays at its final write).
func TestWriteUnitsPerBatchedJob(t *testing.T) {
	client := testenv.DynamoDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	log := &capacityLog{}
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	batchID := wire.NewID()
	// The largest batch: its shards hold the most indexes.
	const n = jobs.MaxBatchJobs
	b, err := store.CreateBatch(ctx, &driver.Batch{ID: batchID, Owner: "o", Status: jobs.StatusRunning, Total: n, Shards: driver.MaxBatchShards, CreatedAt: now, SweepAt: now.Add(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.OpenBatch(ctx, batchID); err != nil {
		t.Fatal(err)
	}
	// Measure the jobs of one shard, the last ones of their shard.
	const measured = 20
	for k := range measured {
		i := n - 1 - k*driver.MaxBatchShards
		rec := &driver.Record{ID: wire.BatchJobID(batchID, i), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`),
			BatchID: batchID, BatchIndex: i, BatchSize: n, BatchShards: driver.MaxBatchShards, CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute)}
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	// Fill the shard with the other jobs' counts first (not measured).
	shard := (n - 1) % driver.MaxBatchShards
	for i := shard; i < n-measured*driver.MaxBatchShards; i += driver.MaxBatchShards {
		if _, err := store.CountInBatch(ctx, b, driver.BatchCount{Index: i, Status: jobs.StatusSucceeded, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	log.table, log.index = map[string]float64{}, map[string]float64{}
	for k := range measured {
		i := n - 1 - k*driver.MaxBatchShards
		id := wire.BatchJobID(batchID, i)
		rec := &driver.Record{ID: id, Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`),
			BatchID: batchID, BatchIndex: i, BatchSize: n, BatchShards: driver.MaxBatchShards, CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute)}
		if err := store.Create(ctx, &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`),
			CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute)}); err != nil { // the create, measured on a twin
			t.Fatal(err)
		}
		if _, err := store.Claim(ctx, id, driver.Claim{Token: "t", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := store.Finish(ctx, id, "t", driver.Outcome{Status: jobs.StatusSucceeded, At: now, After: []string{"batch"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.CountInBatch(ctx, b, driver.BatchCount{Index: rec.BatchIndex, Status: jobs.StatusSucceeded, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := store.DoneAfter(ctx, id, driver.AfterOf{Attempt: 1, FinishedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	units := func(ops ...string) float64 {
		var sum float64
		for _, op := range ops {
			sum += log.table[op] + log.index[op]
		}
		return sum
	}
	perJob := units("create", "claim", "finish", "count_in_batch", "done_after") / measured
	t.Logf("a batched job: %g write units (a plain one: 10): count %g, clear %g", perJob, units("count_in_batch")/measured, units("done_after")/measured)
	if perJob != 12 {
		t.Errorf("%g write units per batched job, want 12 (a plain job's 10, count 1, clear 1; the sweep entry leaves at the clear, not the final write)", perJob)
	}
	log.table, log.index = map[string]float64{}, map[string]float64{}
	for s := range driver.MaxBatchShards {
		if _, err := store.ShardDone(ctx, batchID, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.EndBatch(ctx, batchID, jobs.StatusSucceeded, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	perBatch := units("shard_done", "end_batch")
	t.Logf("the batch's end: %g write units for %d shards", perBatch, driver.MaxBatchShards)
	if perBatch != driver.MaxBatchShards+2 {
		t.Errorf("%g write units for the batch's end, want %d (a shard done each, end 1 + index 1)", perBatch, driver.MaxBatchShards+2)
	}
}

// countingAPI counts the operations a store makes.
type countingAPI struct {
	dynamostore.API
	mu  sync.Mutex
	ops map[string]int
}

func (c *countingAPI) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ops == nil {
		c.ops = map[string]int{}
	}
	c.ops[op]++
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.count("Query")
	return c.API.Query(ctx, in, opts...)
}

func (c *countingAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.count("BatchGetItem")
	return c.API.BatchGetItem(ctx, in, opts...)
}

// TestListingCapacity pins what listing costs (docs/evidence/CAPACITY.md): it adds
// one write unit to a job's life (the owner index entry, at creation) and
// one more to a failed or cancelled job (the attention index); a page of
// jobs reads one unit per job it returns (plus a fraction of a unit of
// index), and a status only the job itself can tell reads at most twice
// the page's limit; nothing scans the table.
func TestListingCapacity(t *testing.T) {
	client := testenv.DynamoDB(t)
	log := &capacityLog{}
	api := &countingAPI{API: client}
	store := dynamostore.New(api, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	owner := "arn:aws:iam::123456789012:user/alice"
	life := func(status jobs.Status) float64 {
		before := log.table["create"] + log.index["create"] + log.table["claim"] + log.index["claim"] + log.table["finish"] + log.index["finish"]
		rec := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: owner, Status: jobs.StatusQueued, Payload: []byte(`{}`),
			CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(time.Minute)}
		now = now.Add(time.Millisecond)
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		tok := wire.NewID()
		if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: tok, At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		o := driver.Outcome{Status: status, At: now, ExpiresAt: now.Add(time.Hour)}
		if status == jobs.StatusFailed {
			o.Code = "boom"
		}
		if err := store.Finish(ctx, rec.ID, tok, o); err != nil {
			t.Fatal(err)
		}
		return log.table["create"] + log.index["create"] + log.table["claim"] + log.index["claim"] + log.table["finish"] + log.index["finish"] - before
	}
	succeeded, failed := life(jobs.StatusSucceeded), life(jobs.StatusFailed)
	t.Logf("a job's life: succeeded %g write units, failed %g (without listing: 5)", succeeded, failed)
	if succeeded != 10 || failed != 11 {
		t.Errorf("succeeded %g, failed %g write units; want 10 and 11 (listing adds 5: the owner index 1, the unfinished indexes 4; 1 more for a failed job)", succeeded, failed)
	}
	// 40 more: every 4th failed, the rest succeeded.
	for i := range 40 {
		if i%4 == 0 {
			life(jobs.StatusFailed)
		} else {
			life(jobs.StatusSucceeded)
		}
	}
	reads := func(q driver.ListQuery) (returned int, units float64) {
		t.Helper()
		before := log.table["list"] + log.index["list"] + log.table["list_get"]
		page, err := store.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Records), log.table["list"] + log.index["list"] + log.table["list_get"] - before
	}
	key := wire.OwnerKey(owner)
	for name, q := range map[string]driver.ListQuery{
		"newest 20":            {OwnerKey: key, Limit: 20},
		"failed, 5":            {OwnerKey: key, Limit: 5, Status: jobs.StatusFailed},
		"succeeded, 10":        {OwnerKey: key, Limit: 10, Status: jobs.StatusSucceeded},
		"queued (none), 10":    {OwnerKey: key, Limit: 10, Status: jobs.StatusQueued},
		"failed of a kind, 50": {OwnerKey: key, Limit: 50, Status: jobs.StatusFailed, Kind: "k"},
	} {
		n, units := reads(q)
		t.Logf("list %s: %d jobs for %g read units", name, n, units)
		// One unit per job read (strongly consistent, under 4 KB), and
		// half a unit per index query (eventually consistent, under 4 KB):
		// one query of each of the owner's partitions (its shards, and for
		// the owner and attention indexes its key from before the shards),
		// and one more of each that may hold more to know whether a next
		// page exists.
		parts := dynamostore.ListShards + 1
		if q.Status == jobs.StatusQueued || q.Status == jobs.StatusRunning {
			parts = dynamostore.ListShards // created sharded: no key from before
		}
		index := 0.5 * 2 * float64(parts)
		budget := float64(n) + index
		if q.Status == jobs.StatusSucceeded {
			budget = float64(2*q.Limit) + index
		}
		if q.Status == jobs.StatusQueued {
			// None is queued: one empty query of each shard, nothing read.
			budget = 0.5 * float64(parts)
		}
		if units > budget || (n == 0 && q.Status != jobs.StatusQueued) {
			t.Errorf("list %s: %d jobs for %g read units, want at most %g", name, n, units, budget)
		}
	}
	if n, _ := reads(driver.ListQuery{OwnerKey: key, Limit: 50, Status: jobs.StatusFailed}); n != 11 {
		t.Errorf("%d failed jobs listed, want 11", n)
	}
	for op := range api.ops {
		if op != "Query" && op != "BatchGetItem" {
			t.Errorf("listing made a %s", op)
		}
	}
}

// TestUnfinishedListingReadsOnlyTheUnfinished: "what is running now?"
// answers from the owner's running jobs alone, however long its history
// and however many jobs are queued (its own or other owners'), in one
// request; queued jobs page at a cost bounded per page (docs/evidence/CAPACITY.md).
func TestUnfinishedListingReadsOnlyTheUnfinished(t *testing.T) {
	client := testenv.DynamoDB(t)
	log := &capacityLog{}
	table := testenv.NewTable(t, client)
	store := dynamostore.New(client, table, dynamostore.Config{OnCapacity: log.record})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	owner, other := "arn:aws:iam::123456789012:role/orders", "arn:aws:iam::123456789012:role/billing"
	const n = 5000
	type spec struct {
		owner  string
		status jobs.Status
		count  int
	}
	specs := []spec{{owner, jobs.StatusSucceeded, n}, {owner, jobs.StatusQueued, n}, {owner, jobs.StatusRunning, 3},
		{other, jobs.StatusQueued, n / 2}, {other, jobs.StatusRunning, n / 2}}
	// Written 25 at a time (BatchWriteItem) as the store would have left
	// them: the store's own item for a queued job, moved by hand to
	// running or succeeded as a claim and a final write would.
	wantRunning := map[string]bool{}
	var batch []types.WriteRequest
	flush := func() {
		for len(batch) > 0 {
			out, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: batch}})
			if err != nil {
				t.Fatal(err)
			}
			batch = out.UnprocessedItems[table]
		}
	}
	i := 0
	for _, sp := range specs {
		for range sp.count {
			i++
			created := now.Add(time.Duration(i) * time.Millisecond)
			rec := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: sp.owner, Status: jobs.StatusQueued, Payload: []byte(`{}`),
				CreatedAt: created, UpdatedAt: created, SweepAt: created.Add(time.Hour)}
			put, err := store.TransactPut(rec)
			if err != nil {
				t.Fatal(err)
			}
			item := put[0].Put.Item
			switch sp.status {
			case jobs.StatusRunning:
				item["status"] = &types.AttributeValueMemberS{Value: string(jobs.StatusRunning)}
				item[dynamostore.AttrRunning] = item[dynamostore.AttrQueued]
				delete(item, dynamostore.AttrQueued)
				if sp.owner == owner {
					wantRunning[rec.ID] = true
				}
			case jobs.StatusSucceeded:
				item["status"] = &types.AttributeValueMemberS{Value: string(jobs.StatusSucceeded)}
				for _, a := range []string{dynamostore.AttrQueued, dynamostore.AttrSweepShard, dynamostore.AttrSweepAt} {
					delete(item, a)
				}
			}
			batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
			if len(batch) == 25 {
				flush()
			}
		}
	}
	flush()
	key := wire.OwnerKey(owner)
	read := func(q driver.ListQuery) (driver.ListPage, float64) {
		t.Helper()
		before := log.table["list"] + log.index["list"] + log.table["list_get"]
		page, err := store.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return page, log.table["list"] + log.index["list"] + log.table["list_get"] - before
	}
	// The index queries of a page: one per partition of the owner, its
	// ListShards shards (the unfinished indexes were created sharded, so no
	// key from before the shards), and each that may hold more, once more
	// to know.
	perQuery := 0.5
	indexBound := perQuery * 2 * float64(dynamostore.ListShards)
	page, units := read(driver.ListQuery{OwnerKey: key, Status: jobs.StatusRunning, Limit: 50})
	t.Logf("running: %d jobs in one request for %g read units (%d partitions at 0.5 each, and the jobs)", len(page.Records), units, dynamostore.ListShards)
	if len(page.Records) != 3 || page.Next != "" {
		t.Fatalf("running: %d jobs, next %q; want the 3 in one page", len(page.Records), page.Next)
	}
	for _, r := range page.Records {
		if !wantRunning[r.ID] {
			t.Fatalf("running listed %s (%s of %s)", r.ID, r.Status, r.Owner)
		}
	}
	if budget := perQuery*float64(dynamostore.ListShards) + 3; units > budget {
		t.Errorf("running: %g read units, want at most %g (whatever the history and the queue)", units, budget)
	}
	seen := map[string]bool{}
	pages, worst := 0, 0.0
	after := ""
	for {
		page, units := read(driver.ListQuery{OwnerKey: key, Status: jobs.StatusQueued, Limit: 100, After: after})
		pages++
		worst = max(worst, units)
		for _, r := range page.Records {
			if r.Status != jobs.StatusQueued || r.Owner != owner || seen[r.ID] {
				t.Fatalf("queued page %d: %s %s of %s (seen %v)", pages, r.ID, r.Status, r.Owner, seen[r.ID])
			}
			seen[r.ID] = true
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	t.Logf("queued: %d jobs in %d pages of 100, at most %g read units a page", len(seen), pages, worst)
	if len(seen) != n {
		t.Errorf("queued: %d jobs listed, want %d", len(seen), n)
	}
	if budget := 100 + indexBound + perQuery*float64(dynamostore.ListShards); worst > budget {
		t.Errorf("queued: a page read %g units, want at most %g", worst, budget)
	}
}

// What work longer than one invocation adds, measured the same way: a
// heartbeat, a run's first heartbeat (which moves the sweep time), a
// checkpoint, a continuation (its requeue and the next claim), and the
// sweeper's look at a live heartbeating run (its read and the deferral of
// its sweep entry); write units unless named read units.
func TestWriteUnitsPerHeartbeatCheckpointAndContinuation(t *testing.T) {
	client := testenv.DynamoDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	log := &capacityLog{}
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	rec := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`),
		CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute)}
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	measure := func(f func() error) float64 {
		t.Helper()
		log.table, log.index = map[string]float64{}, map[string]float64{}
		if err := f(); err != nil {
			t.Fatal(err)
		}
		var sum float64
		for op := range log.table {
			sum += log.table[op] + log.index[op]
		}
		for op := range log.index {
			if _, ok := log.table[op]; !ok {
				sum += log.index[op]
			}
		}
		return sum
	}
	first := measure(func() error {
		return store.Heartbeat(ctx, rec.ID, "a", driver.Heartbeat{LeaseUntil: now.Add(30 * time.Second), At: now, SweepAt: now.Add(30 * time.Second)})
	})
	beat := measure(func() error {
		return store.Heartbeat(ctx, rec.ID, "a", driver.Heartbeat{LeaseUntil: now.Add(40 * time.Second), At: now})
	})
	checkpoint := measure(func() error {
		return store.Checkpoint(ctx, rec.ID, "a", driver.Checkpoint{Data: make([]byte, 300), LeaseUntil: now.Add(40 * time.Second), At: now})
	})
	// A durable step (jobs.Step, its third): its write stores the job's
	// state (the three steps' results, 200 B sealed) and the marks its
	// views show, as package jobs writes them.
	const threeMarks = `[{"name":"charge","kind":"step","status":"done","at":"2026-12-06T04:00:00.123Z"},` +
		`{"name":"ship","kind":"step","status":"done","at":"2026-12-06T04:00:01.456Z"},` +
		`{"name":"review","kind":"step","status":"done","at":"2026-12-06T04:00:02.789Z"}]`
	step := measure(func() error {
		return store.Checkpoint(ctx, rec.ID, "a", driver.Checkpoint{Data: make([]byte, 200), LeaseUntil: now.Add(40 * time.Second), At: now, Marks: threeMarks})
	})
	// The sweeper's look at a live heartbeating run, when its sweep entry
	// comes due (about once per lease, at most once per sweep): it reads
	// the job (a consistent read, 1 read unit under 4 KB), finds the lease
	// renewed, and moves the entry to the lease's end.
	sweepRead := measure(func() error {
		_, err := store.Get(ctx, rec.ID)
		return err
	})
	sweepMove := measure(func() error {
		return store.Reschedule(ctx, rec.ID, driver.Expect{Status: jobs.StatusRunning, Token: "a"}, now.Add(41*time.Second))
	})
	continuation := measure(func() error {
		if err := store.Requeue(ctx, rec.ID, "a", driver.Requeue{At: now, RunAt: now, SweepAt: now.Add(time.Minute), Continue: true}); err != nil {
			return err
		}
		_, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "b", At: now, LeaseUntil: now.Add(time.Minute)})
		return err
	})
	// Sent first: the job has no sweep entry until its first heartbeat
	// puts it in; its continuation takes it out (the new message is its
	// net).
	rec = &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	firstSent := measure(func() error {
		return store.Heartbeat(ctx, rec.ID, "a", driver.Heartbeat{LeaseUntil: now.Add(30 * time.Second), At: now, SweepAt: now.Add(30 * time.Second)})
	})
	continuationSent := measure(func() error {
		if err := store.Requeue(ctx, rec.ID, "a", driver.Requeue{At: now, RunAt: now, Continue: true}); err != nil {
			return err
		}
		_, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "b", At: now, LeaseUntil: now.Add(time.Minute)})
		return err
	})
	// A 10 KB checkpoint (sealed: it does not compress) goes in an item
	// of its own: the heartbeats after it still cost 1.
	bigCheckpoint := measure(func() error {
		return store.Checkpoint(ctx, rec.ID, "b", driver.Checkpoint{Data: make([]byte, 10<<10), LeaseUntil: now.Add(50 * time.Second), At: now, Until: now.Add(30 * 24 * time.Hour)})
	})
	beatAfter := measure(func() error {
		return store.Heartbeat(ctx, rec.ID, "b", driver.Heartbeat{LeaseUntil: now.Add(60 * time.Second), At: now})
	})
	// A sleep (Job.Sleep of 2 days, sent first): the park writes the
	// job's state (its steps and the sleep's end, 200 bytes sealed) and
	// puts it in the sweep index, which sends it 10 minutes before its
	// end; then the claim at its end.
	slept := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
	if err := store.Create(ctx, slept); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, slept.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	end := now.Add(48 * time.Hour)
	sleep := measure(func() error {
		if err := store.Requeue(ctx, slept.ID, "a", driver.Requeue{At: now, RunAt: end, SweepAt: end.Add(-10 * time.Minute), WaitingOn: "sleep",
			Checkpoint: make([]byte, 200), CheckpointUntil: end.Add(30 * 24 * time.Hour)}); err != nil {
			return err
		}
		_, err := store.Claim(ctx, slept.ID, driver.Claim{Token: "b", At: end, LeaseUntil: end.Add(time.Minute)})
		return err
	})
	// A wait for a signal (WaitForSignal, 2 days, sent first), woken by
	// its signal (200 bytes sealed) a minute later: the park, as a
	// sleep's; the signal, which stores it and makes the job due; the
	// claim.
	waited := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
	if err := store.Create(ctx, waited); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, waited.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	woken := now.Add(time.Minute)
	park := measure(func() error {
		return store.Requeue(ctx, waited.ID, "a", driver.Requeue{At: now, RunAt: end, SweepAt: end.Add(-10 * time.Minute), WaitingOn: driver.WaitSignalOn("approval"),
			Checkpoint: make([]byte, 200), CheckpointUntil: end.Add(30 * 24 * time.Hour)})
	})
	wake := measure(func() error {
		return store.Signal(ctx, waited.ID, driver.Signal{Name: "approval", Data: make([]byte, 200), At: woken, Max: 8, Wake: true, RunAt: woken, SweepAt: woken.Add(time.Minute)})
	})
	early := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
	if err := store.Create(ctx, early); err != nil {
		t.Fatal(err)
	}
	// A signal that comes before the wait: stored on the queued job alone.
	signalEarly := measure(func() error {
		return store.Signal(ctx, early.ID, driver.Signal{Name: "approval", Data: make([]byte, 200), At: now, Max: 8})
	})
	claimWoken := measure(func() error {
		_, err := store.Claim(ctx, waited.ID, driver.Claim{Token: "b", At: woken, LeaseUntil: woken.Add(time.Minute)})
		return err
	})
	// A signal of 4 KiB of JSON (the most a signal has; 4200 bytes
	// sealed) goes in an item of its own: its delivery writes that item
	// and the job's, the claim reads it (a consistent GetItem: 2 read
	// units over 4 KB), and the job's writes after it cost what they did
	// without it.
	bigSigned := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
	if err := store.Create(ctx, bigSigned); err != nil {
		t.Fatal(err)
	}
	bigSignal := measure(func() error {
		return store.Signal(ctx, bigSigned.ID, driver.Signal{Name: "approval", Data: make([]byte, 4200), At: now, Max: 8, Until: now.Add(30 * 24 * time.Hour)})
	})
	var claimedBig *driver.Record
	claimBig := measure(func() error {
		var err error
		claimedBig, err = store.Claim(ctx, bigSigned.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)})
		return err
	})
	readBig := measure(func() error {
		_, _, err := store.ReadPart(ctx, claimedBig, driver.SignalPart("approval"))
		return err
	})
	beatBig := measure(func() error {
		return store.Heartbeat(ctx, bigSigned.ID, "a", driver.Heartbeat{LeaseUntil: now.Add(2 * time.Minute), At: now})
	})
	// Before checkpoint items: the same, the checkpoint in the job's item.
	inline := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	dynamostore.KeepPayloadsInline(inline)
	old := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
	if err := inline.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := inline.Claim(ctx, old.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := inline.Checkpoint(ctx, old.ID, "a", driver.Checkpoint{Data: make([]byte, 10<<10), LeaseUntil: now.Add(50 * time.Second), At: now}); err != nil {
		t.Fatal(err)
	}
	beatInline := measure(func() error {
		return inline.Heartbeat(ctx, old.ID, "a", driver.Heartbeat{LeaseUntil: now.Add(60 * time.Second), At: now})
	})
	// Before signal items: the 4 KiB signal in the job's item.
	oldSigned := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`), CreatedAt: now, UpdatedAt: now}
	if err := inline.Create(ctx, oldSigned); err != nil {
		t.Fatal(err)
	}
	if err := inline.Signal(ctx, oldSigned.ID, driver.Signal{Name: "approval", Data: make([]byte, 4200), At: now, Max: 8}); err != nil {
		t.Fatal(err)
	}
	if _, err := inline.Claim(ctx, oldSigned.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	beatBigInline := measure(func() error {
		return inline.Heartbeat(ctx, oldSigned.ID, "a", driver.Heartbeat{LeaseUntil: now.Add(2 * time.Minute), At: now})
	})
	got := map[string]float64{"first heartbeat": first, "heartbeat": beat, "checkpoint (300 B)": checkpoint, "continuation": continuation,
		"checkpoint (10 KB)": bigCheckpoint, "heartbeat after a 10 KB checkpoint": beatAfter,
		"heartbeat after a 10 KB checkpoint, inline (before)": beatInline,
		"sweeper's read (read units)":                         sweepRead, "sweeper's deferral": sweepMove,
		"first heartbeat, sent first": firstSent, "continuation, sent first": continuationSent, "sleep, sent first": sleep,
		"signal's park": park, "signal's wake": wake, "claim after a signal": claimWoken, "signal before its wait": signalEarly, "step (its third)": step,
		"signal of 4 KiB": bigSignal, "claim after a 4 KiB signal": claimBig, "the 4 KiB signal's read (read units)": readBig,
		"heartbeat after a 4 KiB signal": beatBig, "heartbeat after a 4 KiB signal, inline (before)": beatBigInline}
	want := map[string]float64{
		"first heartbeat, sent first":                         2, // 1 + the sweep entry in 1
		"sleep, sent first":                                   9, // park 5 (job, running out, queued in, sweep in, waiting in) + claim 4 (job, queued out, running in, waiting out)
		"signal's park":                                       5, // as a sleep's
		"signal's wake":                                       3, // the job with its signal 1 + the sweep entry moved (out 1, in 1)
		"claim after a signal":                                4, // as after a sleep
		"signal before its wait":                              1, // the job's item, under 1 KB with the signal
		"step (its third)":                                    1, // the job's item with its state and marks, under 1 KB
		"signal of 4 KiB":                                     6, // its own item 5 (4200 B and its key), the job's write 1
		"claim after a 4 KiB signal":                          3, // the job 1, queued out 1, running in 1: as without it
		"the 4 KiB signal's read (read units)":                2,
		"heartbeat after a 4 KiB signal":                      1,
		"heartbeat after a 4 KiB signal, inline (before)":     5,
		"continuation, sent first":                            7, // requeue 1 + the sweep entry out 1 + running out 1 + queued in 1, claim 1 + queued out 1 + running in 1
		"sweeper's read (read units)":                         1,
		"sweeper's deferral":                                  3, // 1 + the sweep entry moved (out 1, in 1)
		"first heartbeat":                                     3, // 1 + the sweep entry moved (out 1, in 1)
		"heartbeat":                                           1,
		"checkpoint (300 B)":                                  1,  // the item stays under 1 KB
		"checkpoint (10 KB)":                                  12, // its own item 11 (10 KB and its key), the job's write 1
		"heartbeat after a 10 KB checkpoint":                  1,
		"heartbeat after a 10 KB checkpoint, inline (before)": 11,
		"continuation":                                        8, // as a retry: requeue 1 + sweep key moved 2 + running out 1 + queued in 1, claim 1 + queued out 1 + running in 1
	}
	for name, w := range want {
		t.Logf("%s: %v units", name, got[name])
		if got[name] != w {
			t.Errorf("%s: %v units, want %v", name, got[name], w)
		}
	}
}

// What flow control adds per job (docs/guide/FLOW_CONTROL.md, "Costs"): each
// figure is one call on DynamoDB Local's reported consumed capacity. A
// kind with no limit and no unique key makes none of these calls
// (TestUnlimitedKindsMakeNoFlowCalls in package jobs).
func TestWriteUnitsPerFlowControl(t *testing.T) {
	client := testenv.DynamoDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	log := &capacityLog{}
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	measure := func(f func() error) float64 {
		t.Helper()
		log.table, log.index = map[string]float64{}, map[string]float64{}
		if err := f(); err != nil {
			t.Fatal(err)
		}
		var sum float64
		for _, v := range log.table {
			sum += v
		}
		for _, v := range log.index {
			sum += v
		}
		return sum
	}
	lease := now.Add(time.Minute)
	claim := func(holder string) driver.SlotClaim {
		return driver.SlotClaim{Holder: holder, Max: 1, LeaseUntil: lease, At: now, Waiters: 8}
	}
	acquire := measure(func() error { _, err := store.AcquireSlot(ctx, "slots", claim("a")); return err })
	queue := measure(func() error {
		st, err := store.AcquireSlot(ctx, "slots", claim("b"))
		if err == nil && st != driver.SlotQueued {
			t.Errorf("second holder of 1 slot: state %v, want queued", st)
		}
		return err
	})
	queueFirst := measure(func() error {
		c := claim("c")
		c.ExpectFull = true
		st, err := store.AcquireSlot(ctx, "slots", c)
		if err == nil && st != driver.SlotQueued {
			t.Errorf("third holder of 1 slot: state %v, want queued", st)
		}
		return err
	})
	pop := measure(func() error {
		next, _, err := store.PopWaiter(ctx, "slots", "a")
		if err == nil && next != "b" {
			t.Errorf("pop took %q off, want b", next)
		}
		return err
	})
	release := measure(func() error {
		next, err := store.ReleaseSlot(ctx, "slots", "a")
		if err == nil && next != "c" {
			t.Errorf("release woke %q, want c", next)
		}
		return err
	})
	bucket := driver.TokenBucket{PerSecond: 20, Burst: 1, At: now}
	tokenIdle := measure(func() error { _, err := store.TakeToken(ctx, "bucket", bucket); return err })
	tokenBusy := measure(func() error { _, err := store.TakeToken(ctx, "bucket", bucket); return err })
	unique := measure(func() error {
		_, err := store.ClaimUnique(ctx, "u", driver.UniqueClaim{JobID: "j", At: now})
		return err
	})
	duplicate := measure(func() error {
		_, err := store.ClaimUnique(ctx, "u", driver.UniqueClaim{JobID: "k", At: now})
		return err
	})
	unlock := measure(func() error { return store.ReleaseUnique(ctx, "u", "j") })
	got := map[string]float64{"slot taken": acquire, "slot queued": queue, "slot queued first": queueFirst, "waiter popped": pop, "slot released": release,
		"token (idle bucket)": tokenIdle, "token (busy bucket)": tokenBusy,
		"unique key taken": unique, "unique key held": duplicate, "unique key freed": unlock}
	// DynamoDB Local reports no capacity for a write whose condition
	// failed; AWS charges it a write unit (docs/guide/FLOW_CONTROL.md adds it).
	want := map[string]float64{
		"slot taken":          1, // one write, no read (the first makes the item: + 1 on AWS, the take's failed condition)
		"slot queued":         1, // + 1 on AWS: the take's condition fails first (the item is full)
		"slot queued first":   1, // ExpectFull: the join first
		"waiter popped":       1, // the slot passed on: one write, no release nor acquire
		"slot released":       1,
		"token (idle bucket)": 1, // + 1 on AWS: the busy path's condition fails first
		"token (busy bucket)": 1,
		"unique key taken":    1,
		"unique key held":     0, // + 1 on AWS: the failed condition, which returns the holder (no read)
		"unique key freed":    1,
	}
	for name, w := range want {
		t.Logf("%s: %v capacity units", name, got[name])
		if got[name] != w {
			t.Errorf("%s: %v capacity units, want %v", name, got[name], w)
		}
	}
}

// TestWriteUnitsPerAnnouncedJob measures what announcing a job's outcome
// (KindOpts.Events) adds to a small job's life: the final write also
// counts the outcome (same item, same write) and keeps the job in the
// sweep index until the event is sent; DoneAfter then clears the step and
// the index entry. A job of a kind without events pays nothing
// (TestWriteUnitsPerJob's 11 is unchanged). docs/reference/EVENTS.md quotes it.
func TestWriteUnitsPerAnnouncedJob(t *testing.T) {
	client := testenv.DynamoDB(t)
	log := &capacityLog{}
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	rec := &driver.Record{
		ID: wire.NewID(), Kind: "example.hash", Owner: "arn:aws:iam::123456789012:user/alice", Status: jobs.StatusQueued,
		Payload: []byte(`{"text":"` + strings.Repeat("a", 28) + `"}`), RequestHash: "0123456789abcdef0123456789abcdef",
		CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute), Events: true,
	}
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	token := wire.NewID()
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: token, At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := store.Publish(ctx, rec.ID, token, []byte(`{"rounds_done":500000}`), now); err != nil {
		t.Fatal(err)
	}
	if err := store.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`{"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}`),
		At: now, ExpiresAt: now.Add(time.Hour), After: []string{"event"}, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if err := store.DoneAfter(ctx, rec.ID, driver.AfterOf{Outcomes: 1, Attempt: 1, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	var total float64
	var cells []string
	for _, op := range []string{"create", "claim", "publish", "finish", "done_after"} {
		total += log.table[op] + log.index[op]
		cells = append(cells, fmt.Sprintf("%s %g+%g", op, log.table[op], log.index[op]))
	}
	t.Logf("announced small job: %s; total %g WRU", strings.Join(cells, ", "), total)
	if total != 12 {
		t.Errorf("%g write units for an announced job, want 12 (the plain job's 11, plus DoneAfter's write, whose index removal the final write no longer makes)", total)
	}
}

// TestUnitsPerDependency measures, through the engine on DynamoDB Local,
// what a job that runs after another costs beside two plain jobs: the
// dependent's enqueue reads its parent and records itself on it, waits out
// of the sweep index, and is counted and released by its parent's
// post-outcome step. docs/guide/DEPENDENCIES.md records the figures.
func TestUnitsPerDependency(t *testing.T) {
	client := testenv.DynamoDB(t)
	log := &capacityLog{}
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "k", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	queue := &jobstest.MemQueue{}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	owner := "arn:aws:iam::123456789012:user/alice"
	run := func(id string) {
		t.Helper()
		if resp, _ := worker.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: message.Encode(id)}}}); len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch item failures %v", resp.BatchItemFailures)
		}
	}
	total := func() (writes, reads float64) {
		for op := range log.table {
			units := log.table[op] + log.index[op]
			if op == "pauses" {
				continue // the pause set's read: an instance's, once in 5 s at most, not a job's
			}
			if op == "get" || op == "list" || op == "due" {
				reads += units
			} else {
				writes += units
			}
		}
		log.table, log.index = map[string]float64{}, map[string]float64{}
		return writes, reads
	}
	// Two plain jobs.
	for range 2 {
		res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: "k", Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		run(res.Job.ID)
	}
	plainW, plainR := total()
	// A parent and a job after it.
	a, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: "k", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: "k", Payload: []byte(`{}`), EnqueueOpts: jobs.EnqueueOpts{After: []string{a.Job.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	run(a.Job.ID)
	run(b.Job.ID)
	var ops []string
	for _, op := range log.order {
		if u := log.table[op] + log.index[op]; u > 0 {
			ops = append(ops, fmt.Sprintf("%s %g", op, u))
		}
	}
	depW, depR := total()
	if got, err := store.Get(ctx, b.Job.ID); err != nil || got.Status != jobs.StatusSucceeded {
		t.Fatalf("the dependent: %v %v", got, err)
	}
	t.Logf("two plain jobs: %g write units, %g read units; a parent and a job after it: %g and %g (%s)", plainW, plainR, depW, depR, strings.Join(ops, ", "))
	// 3 per parent (recorded on it 1, counted on the dependent 1, the
	// parent's post-outcome step cleared 1) and 6 per dependent (out of
	// the sweep index while it waits 2, back in when released 2; in the
	// waiting jobs' index while it waits 2).
	if extra := depW - plainW; extra != 9 {
		t.Errorf("a dependency costs %g write units more than two plain jobs, want 9", extra)
	}
	if extra := depR - plainR; extra != 1 {
		t.Errorf("a dependency costs %g read units more than two plain jobs, want 1 (the parent read at enqueue)", extra)
	}
}

// TestWriteUnitsPerCapAndWait measures what the indexes of the caps and
// of the waiting count add to a small job: a job of a kind that caps its
// queued jobs (QueueCapped) is in KindQueuedIndex while queued (in at
// creation, out at the claim: 2 units over TestWriteUnitsPerJob's 11), and
// a park (a requeue that waits, then the next claim) puts the job in
// WaitingIndex and takes it out (2 units over a retry's 8). A job of a
// kind without a cap that never waits pays neither (TestWriteUnitsPerJob
// and TestWriteUnitsPerRetryAndCancel are unchanged).
func TestWriteUnitsPerCapAndWait(t *testing.T) {
	client := testenv.DynamoDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	total := func(log *capacityLog) (sum, index float64) {
		for op, v := range log.table {
			sum += v + log.index[op]
			index += log.index[op]
		}
		return sum, index
	}
	capped := &capacityLog{}
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: capped.record})
	rec := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`),
		CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute), QueueCapped: true}
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := store.Finish(ctx, rec.ID, "a", driver.Outcome{Status: jobs.StatusSucceeded, At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, index := total(capped); got != 12 || index != 9 {
		t.Errorf("a capped kind's job (create, claim, finish): %v write units (%v index), want 12 (9: the uncapped job's 7 + KindQueuedIndex in and out)", got, index)
	}

	park := &capacityLog{}
	store = dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: park.record})
	rec = &driver.Record{ID: wire.NewID(), Kind: "k", Owner: "o", Status: jobs.StatusQueued, Payload: []byte(`{}`),
		CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(3 * time.Minute)}
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "a", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	park.table, park.index = map[string]float64{}, map[string]float64{} // count from the park
	if err := store.Requeue(ctx, rec.ID, "a", driver.Requeue{At: now, RunAt: now, SweepAt: now.Add(4 * time.Minute), WaitingOn: "concurrency", Unstart: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "b", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := total(park); got != 10 {
		t.Errorf("a park and the next claim: %v write units, want 10 (a retry's 8 + WaitingIndex in and out)", got)
	}
	t.Logf("a capped job: 12 write units (a plain one 10 without its publish); a park and its next claim: 10 (a retry 8)")
}

// TestWriteUnitsPerJobSentFirst measures a plain job end to end, through
// Service.Enqueue, the SQS emulator and the worker's claim and final
// write on DynamoDB Local, with and without message first: sent before it
// is stored, the job never enters the sweep index (2 units less).
// docs/evidence/CAPACITY.md records the figures.
func TestWriteUnitsPerJobSentFirst(t *testing.T) {
	client, sqsClient := testenv.DynamoDB(t), testenv.SQS(t)
	ctx := context.Background()
	owner := "arn:aws:iam::123456789012:user/alice"
	for _, tc := range []struct {
		first bool
		want  float64
	}{{true, 8}, {false, 10}} {
		log := &capacityLog{}
		store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
		urls := testenv.NewQueues(t, sqsClient, sqsqueue.DefaultSpec(time.Minute))
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "k", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
		c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: sqsqueue.New(sqsClient, urls.Queue), MessageFirst: tc.first, CancelCheck: -1})
		if err != nil {
			t.Fatal(err)
		}
		id := runOne(t, c, sqsClient, urls.Queue, owner, "k", []byte(`{}`))
		if got, err := store.Get(ctx, id); err != nil || got.Status != jobs.StatusSucceeded {
			t.Fatalf("the job: %+v %v", got, err)
		}
		var total float64
		var cells []string
		for _, op := range []string{"create", "claim", "finish"} {
			total += log.table[op] + log.index[op]
			cells = append(cells, fmt.Sprintf("%s %g+%g", op, log.table[op], log.index[op]))
		}
		t.Logf("message first %v: %s; total %g WRU", tc.first, strings.Join(cells, ", "), total)
		if total != tc.want {
			t.Errorf("message first %v: %g write units per plain job, want %g", tc.first, total, tc.want)
		}
	}
}
