package partitions_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/partitions"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is a partition model in front of the test DynamoDB Local, with the
// store's table created through it, a client of the model that does not
// retry (each error is seen as it comes), and a frozen clock: buckets
// refill only when the test advances it.
type env struct {
	model  *partitions.Model
	ddb    *dynamodb.Client
	direct *dynamodb.Client
	table  string
	clock  *jobstest.Clock
}

// classify names the store's keys as the scale scenario does.
func classify(index, key string) string {
	switch {
	case index == "" && strings.HasPrefix(key, "batch#"):
		return "batch item"
	case index == "":
		return "job item"
	}
	return index + " index partition"
}

func newEnv(t *testing.T, limits partitions.Limits) *env {
	t.Helper()
	e := &env{direct: testenv.DynamoDB(t), table: testenv.UniqueName(t, "part"), clock: jobstest.NewClock(time.Unix(1_800_000_000, 0))}
	m, err := partitions.Start(partitions.Config{
		Target: testenv.DynamoDBEndpoint(t), Table: dynamostore.CreateTableInput(e.table),
		Limits: limits, Scale: 1, Classify: classify, Clock: e.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	e.model = m
	e.ddb = localaws.DynamoDBClient(m.URL(), func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	if _, err := e.ddb.CreateTable(context.Background(), dynamostore.CreateTableInput(e.table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.direct.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &e.table})
	})
	return e
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": s(id)}
}

func (e *env) put(it map[string]types.AttributeValue) error {
	_, err := e.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &e.table, Item: it})
	return err
}

// update runs an UpdateItem built with the SDK's expression builder, as
// the store builds them.
func (e *env) update(id string, upd expression.UpdateBuilder) (*dynamodb.UpdateItemOutput, error) {
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return nil, err
	}
	return e.ddb.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: &e.table, Key: key(id), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
}

func (e *env) stored(t *testing.T, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.direct.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.table, Key: key(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// writes returns the write units each key accepted ("index:key" ->
// units), and checks that DynamoDB Local counted the same.
func (e *env) writes(t *testing.T) map[string]float64 {
	t.Helper()
	r := e.model.Report(-1)
	if r.ErrorCount > 0 || r.MismatchCount > 0 {
		t.Fatalf("the model's errors %v, mismatches with DynamoDB Local %v", r.Errors, r.Mismatches)
	}
	out := map[string]float64{}
	for _, k := range r.Keys {
		if k.Write.Total > 0 {
			ix := k.Index
			if ix == "" {
				ix = "table"
			}
			out[ix+":"+k.Key] = k.Write.Total
		}
	}
	return out
}

func sameUnits(got, want map[string]float64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func throttled(t *testing.T, err error, reason string) {
	t.Helper()
	var pte *types.ProvisionedThroughputExceededException
	if !errors.As(err, &pte) {
		t.Fatalf("got %v (%T), want ProvisionedThroughputExceededException", err, err)
	}
	if len(pte.ThrottlingReasons) != 1 || aws.ToString(pte.ThrottlingReasons[0].Reason) != reason {
		t.Fatalf("throttling reasons %+v, want %s", pte.ThrottlingReasons, reason)
	}
}

func TestHotKeyIsThrottledAtItsBudgetSpreadKeysAreNot(t *testing.T) {
	e := newEnv(t, partitions.Limits{WriteUnitsPerSecond: 10})
	hot := map[string]types.AttributeValue{"id": s("hot"), "v": n("1")}
	for i := range 10 {
		if err := e.put(hot); err != nil {
			t.Fatalf("write %d of 10 to the hot key: %v", i+1, err)
		}
	}
	throttled(t, e.put(hot), "TableWriteKeyRangeThroughputExceeded")
	for i := range 100 {
		if err := e.put(map[string]types.AttributeValue{"id": s(fmt.Sprintf("spread-%d", i))}); err != nil {
			t.Fatalf("spread key %d: %v", i, err)
		}
	}
	e.clock.Advance(time.Second)
	if err := e.put(hot); err != nil {
		t.Fatalf("the hot key a second later: %v", err)
	}
	r := e.model.Report(3)
	top := r.Keys[0]
	if top.Key != "hot" || top.Write.Peak != 10 || top.Write.Total != 11 || top.Write.Refused != 1 {
		t.Fatalf("hottest key %+v, want hot with a peak of 10, 11 units, 1 refusal", top)
	}
	if len(r.ThrottledKeys) != 1 || r.Throttled != 1 {
		t.Fatalf("throttled keys %+v (%d requests), want the hot key only, once", r.ThrottledKeys, r.Throttled)
	}
	if c := r.Classes[0]; c.Class != "job item" || c.Keys != 101 || c.Write.Peak != 10 || c.Write.AtFullScale != 10 || c.Write.MaxJobsPerSecond != 1e6 || !c.Write.Capped {
		t.Fatalf("class %+v, want job items peaking at 10 units in a window (scale 1: a second), capped", c)
	}
}

func TestIndexKeyChangeIsChargedToTheOldAndTheNewPartition(t *testing.T) {
	e := newEnv(t, partitions.Limits{})
	if err := e.put(map[string]types.AttributeValue{"id": s("j1"), "lo": s("owner-a"), "lc": s("0001"), "kind": s("k")}); err != nil {
		t.Fatal(err)
	}
	out, err := e.update("j1", expression.Set(expression.Name("lo"), expression.Value("owner-b")))
	if err != nil {
		t.Fatal(err)
	}
	if out.Attributes != nil || out.ConsumedCapacity != nil {
		t.Fatalf("the caller asked for no attributes and no capacity, got %v %v", out.Attributes, out.ConsumedCapacity)
	}
	want := map[string]float64{"table:j1": 2, "owner:owner-a": 2, "owner:owner-b": 1}
	if got := e.writes(t); !sameUnits(got, want) {
		t.Fatalf("write units %v, want %v (the put, then a delete on the old partition and a put on the new)", got, want)
	}
}

func TestIndexOverBudgetRefusesTheTableWrite(t *testing.T) {
	e := newEnv(t, partitions.Limits{WriteUnitsPerSecond: 3})
	job := func(i int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": s(fmt.Sprintf("j%d", i)), "lo": s("hot-owner"), "lc": s(fmt.Sprintf("%04d", i)), "kind": s("k")}
	}
	for i := range 3 {
		if err := e.put(job(i)); err != nil {
			t.Fatal(err)
		}
	}
	throttled(t, e.put(job(3)), "IndexWriteKeyRangeThroughputExceeded")
	if it := e.stored(t, "j3"); it != nil {
		t.Fatalf("the refused write was stored: %v", it)
	}
	r := e.model.Report(-1)
	if len(r.ThrottledKeys) != 1 || r.ThrottledKeys[0].Index != "owner" || r.ThrottledKeys[0].Write.Refused != 1 {
		t.Fatalf("throttled keys %+v, want the owner index partition once", r.ThrottledKeys)
	}
	for _, k := range r.Keys {
		if k.Key == "j3" && k.Write.Total != 0 {
			t.Fatalf("the refused job's item was charged %g units", k.Write.Total)
		}
	}
}

func TestProjectedAttributeIsChargedOnceKeysOnlyIndexNever(t *testing.T) {
	e := newEnv(t, partitions.Limits{})
	if err := e.put(map[string]types.AttributeValue{"id": s("j1"), "lo": s("o"), "lc": s("0001"), "kind": s("k1"),
		"status": s("queued"), "sweep_shard": s("3"), "sweep_at": n("100")}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		upd  expression.UpdateBuilder
		want map[string]float64
	}{
		{"a projected attribute of the owner index", expression.Set(expression.Name("kind"), expression.Value("k2")),
			map[string]float64{"table:j1": 1, "owner:o": 1}},
		{"an attribute no index holds", expression.Set(expression.Name("status"), expression.Value("running")).Set(expression.Name("result"), expression.Value("{}")),
			map[string]float64{"table:j1": 1}},
		{"the keys-only index's sort key: the entry moves", expression.Set(expression.Name("sweep_at"), expression.Value(200)),
			map[string]float64{"table:j1": 1, "sweep:3": 2}},
		{"into the attention index, which projects the status", expression.Set(expression.Name("ls"), expression.IfNotExists(expression.Name("lo"), expression.Value("-"))),
			map[string]float64{"table:j1": 1, "owner_attention:o": 1}},
		{"the status, projected by the attention index only", expression.Set(expression.Name("status"), expression.Value("failed")),
			map[string]float64{"table:j1": 1, "owner_attention:o": 1}},
		{"out of the sweep index", expression.Remove(expression.Name("sweep_shard")).Remove(expression.Name("sweep_at")),
			map[string]float64{"table:j1": 1, "sweep:3": 1}},
	}
	for _, st := range steps {
		e.model.Reset()
		if _, err := e.update("j1", st.upd); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := e.writes(t); !sameUnits(got, st.want) {
			t.Errorf("%s: write units %v, want %v", st.name, got, st.want)
		}
	}
}

// batchFinish is the store's final write of a batch job: the job's
// update and the batch counter's, in one transaction.
func (e *env) batchFinish(job string) error {
	jexpr, _ := expression.NewBuilder().WithUpdate(expression.Set(expression.Name("status"), expression.Value("succeeded"))).Build()
	bexpr, _ := expression.NewBuilder().WithUpdate(expression.Add(expression.Name("remaining"), expression.Value(-1))).Build()
	_, err := e.ddb.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: &e.table, Key: key(job), UpdateExpression: jexpr.Update(),
			ExpressionAttributeNames: jexpr.Names(), ExpressionAttributeValues: jexpr.Values()}},
		{Update: &types.Update{TableName: &e.table, Key: key("batch#b1"), UpdateExpression: bexpr.Update(),
			ExpressionAttributeNames: bexpr.Names(), ExpressionAttributeValues: bexpr.Values()}},
	}})
	return err
}

func reasons(t *testing.T, err error) []string {
	t.Helper()
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Fatalf("got %v (%T), want TransactionCanceledException", err, err)
	}
	var codes []string
	for _, r := range tce.CancellationReasons {
		codes = append(codes, aws.ToString(r.Code))
	}
	return codes
}

func TestOverlappingTransactionsOnOneItemConflict(t *testing.T) {
	e := newEnv(t, partitions.Limits{})
	var once sync.Once
	held, release := make(chan struct{}), make(chan struct{})
	partitions.HoldWith(e.model, func(ctx context.Context, _ time.Duration) {
		once.Do(func() { close(held) })
		select {
		case <-release:
		case <-ctx.Done():
		}
	})
	if err := e.put(map[string]types.AttributeValue{"id": s("batch#b1"), "remaining": n("2")}); err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { first <- e.batchFinish("j1") }()
	<-held // j1's transaction holds the batch item
	if got := reasons(t, e.batchFinish("j2")); strings.Join(got, ",") != "None,TransactionConflict" {
		t.Fatalf("the overlapping transaction's reasons %v, want [None TransactionConflict]", got)
	}
	_, err := e.update("batch#b1", expression.Set(expression.Name("note"), expression.Value("x")))
	var tc *types.TransactionConflictException
	if !errors.As(err, &tc) {
		t.Fatalf("a plain write of the held item: %v (%T), want TransactionConflictException", err, err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first transaction: %v", err)
	}
	if err := e.batchFinish("j2"); err != nil {
		t.Fatalf("j2's transaction once j1's ended: %v", err)
	}
	if got := e.stored(t, "batch#b1")["remaining"].(*types.AttributeValueMemberN).Value; got != "0" {
		t.Fatalf("remaining %s, want 0: each job counted once", got)
	}
	r := e.model.Report(-1)
	if r.Conflicts != 2 || r.Keys[0].Key != "batch#b1" || r.Keys[0].Conflicts != 2 {
		t.Fatalf("conflicts %d, hottest key %+v; want 2 on batch#b1", r.Conflicts, r.Keys[0])
	}
}

func TestThrottledTransactionIsCancelledWithThrottlingError(t *testing.T) {
	// Each job's transaction takes 2 units of the batch item's 4.
	e := newEnv(t, partitions.Limits{WriteUnitsPerSecond: 4})
	for _, j := range []string{"j1", "j2"} {
		if err := e.batchFinish(j); err != nil {
			t.Fatalf("%s: %v", j, err)
		}
	}
	if got := reasons(t, e.batchFinish("j3")); strings.Join(got, ",") != "None,ThrottlingError" {
		t.Fatalf("reasons %v, want [None ThrottlingError]: the batch item is throttled, the job's item is not", got)
	}
	if it := e.stored(t, "j3"); it != nil {
		t.Fatalf("a cancelled transaction wrote j3: %v", it)
	}
	want := map[string]float64{"table:j1": 2, "table:j2": 2, "table:batch#b1": 4}
	if got := e.writes(t); !sameUnits(got, want) {
		t.Fatalf("write units %v, want %v (transactions pay twice)", got, want)
	}
}

func TestReadsAreThrottledPerKey(t *testing.T) {
	e := newEnv(t, partitions.Limits{ReadUnitsPerSecond: 2})
	ctx := context.Background()
	for _, id := range []string{"hot", "cold"} {
		if err := e.put(map[string]types.AttributeValue{"id": s(id), "lo": s("o"), "lc": s(id), "kind": s("k")}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(id string) error {
		_, err := e.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.table, Key: key(id), ConsistentRead: aws.Bool(true)})
		return err
	}
	for range 2 {
		if err := get("hot"); err != nil {
			t.Fatal(err)
		}
	}
	throttled(t, get("hot"), "TableReadKeyRangeThroughputExceeded")

	bg, err := e.ddb.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		e.table: {Keys: []map[string]types.AttributeValue{key("hot"), key("cold")}, ConsistentRead: aws.Bool(true)}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(bg.Responses[e.table]) != 1 || len(bg.UnprocessedKeys[e.table].Keys) != 1 ||
		bg.UnprocessedKeys[e.table].Keys[0]["id"].(*types.AttributeValueMemberS).Value != "hot" {
		t.Fatalf("BatchGetItem: responses %v, unprocessed %v; want cold read and hot left unprocessed", bg.Responses, bg.UnprocessedKeys)
	}

	// An index partition: an empty or small eventually consistent Query
	// costs half a unit.
	kc, _ := expression.NewBuilder().WithKeyCondition(expression.Key("lo").Equal(expression.Value("o"))).Build()
	q := &dynamodb.QueryInput{TableName: &e.table, IndexName: aws.String("owner"), KeyConditionExpression: kc.KeyCondition(),
		ExpressionAttributeNames: kc.Names(), ExpressionAttributeValues: kc.Values(), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}
	for i := range 4 {
		out, err := e.ddb.Query(ctx, q)
		if err != nil {
			t.Fatalf("query %d: %v", i+1, err)
		}
		if len(out.Items) != 2 || out.ConsumedCapacity == nil || out.ConsumedCapacity.Table != nil {
			t.Fatalf("query: %d items, capacity %+v; want 2 and the total only", len(out.Items), out.ConsumedCapacity)
		}
	}
	_, err = e.ddb.Query(ctx, q)
	throttled(t, err, "IndexReadKeyRangeThroughputExceeded")
	r := e.model.Report(-1)
	for _, k := range r.Keys {
		if k.Index == "owner" && (k.Read.Total != 2 || k.Read.Refused != 1) {
			t.Fatalf("owner index partition %+v, want 2 read units (4 x 0.5) and 1 refusal", k)
		}
	}
}

func TestBatchWriteLeavesThrottledRequestsUnprocessed(t *testing.T) {
	e := newEnv(t, partitions.Limits{WriteUnitsPerSecond: 1})
	put := func(id string) types.WriteRequest {
		return types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"id": s(id), "lo": s("o"), "lc": s(id)}}}
	}
	out, err := e.ddb.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{
		e.table: {put("a"), put("b")}}})
	if err != nil {
		t.Fatal(err)
	}
	un := out.UnprocessedItems[e.table]
	if len(un) != 1 || un[0].PutRequest.Item["id"].(*types.AttributeValueMemberS).Value != "b" {
		t.Fatalf("unprocessed %v, want b (the owner partition had 1 unit)", out.UnprocessedItems)
	}
	if e.stored(t, "a") == nil || e.stored(t, "b") != nil {
		t.Fatal("want a stored and b not")
	}
	_, err = e.ddb.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{e.table: un}})
	throttled(t, err, "IndexWriteKeyRangeThroughputExceeded")
}

func TestWhatTheModelCannotChargeIsRefusedLoudly(t *testing.T) {
	e := newEnv(t, partitions.Limits{})
	_, err := e.update("j1", expression.Set(expression.Name("m.inner.deeper"), expression.Value("x")))
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" || !strings.Contains(api.ErrorMessage(), "partition model") {
		t.Fatalf("a nested path: %v, want a ValidationException from the partition model", err)
	}
	if it := e.stored(t, "j1"); it != nil {
		t.Fatalf("the refused update was forwarded: %v", it)
	}
	if r := e.model.Report(-1); r.ErrorCount != 1 || !strings.Contains(r.Errors[0], "nested path") {
		t.Fatalf("report errors %v, want the nested path", r.Errors)
	}
}

func TestReportMarkdown(t *testing.T) {
	e := newEnv(t, partitions.Limits{WriteUnitsPerSecond: 2})
	for range 3 {
		_ = e.put(map[string]types.AttributeValue{"id": s("batch#b1")})
	}
	r := e.model.Report(5)
	r.Jobs = 4
	md := r.Markdown()
	for _, want := range []string{
		"| batch item | 1 | 2 | ≥ 2 | 0.5 | 0 | - | 0 | ≤ 5000000 | 1 | 0 |",
		"| `table:batch#b1` | batch item | 2 | 2 | 0 | 0 | 1 / 0 | 0 |",
		"over the run's 4 jobs",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// The store's whole conformance suite, through the model: every request
// the store makes is one the model charges exactly (no refusal, no
// misprediction) and its units agree with DynamoDB Local's own count.
func TestStoreConformanceThroughTheModel(t *testing.T) {
	client := testenv.DynamoDB(t)
	var compared atomic.Int64
	t.Cleanup(func() {
		if compared.Load() < 50 {
			t.Errorf("only %d writes were compared with DynamoDB Local's count", compared.Load())
		}
	})
	jobstest.RunStoreTests(t, func(t *testing.T, clock jobs.Clock) driver.Store {
		table := testenv.UniqueName(t, "part")
		m, err := partitions.Start(partitions.Config{Target: testenv.DynamoDBEndpoint(t), Table: dynamostore.CreateTableInput(table)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			defer m.Close()
			r := m.Report(-1)
			compared.Add(int64(r.CapacityChecks))
			if r.ErrorCount > 0 || r.MismatchCount > 0 {
				t.Errorf("the model refused or mispredicted %d requests %v; %d of %d writes differ from DynamoDB Local %v",
					r.ErrorCount, r.Errors, r.MismatchCount, r.CapacityChecks, r.Mismatches)
			}
		})
		through := localaws.DynamoDBClient(m.URL())
		if _, err := through.CreateTable(context.Background(), dynamostore.CreateTableInput(table)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &table}) })
		return dynamostore.New(through, table, dynamostore.Config{Clock: clock})
	})
}

// At scale k a window, a partition's second, is 1/k seconds of the run: a
// key holds a whole second's budget (1,000 write units) refilled at k x
// 1,000 a second, and its peak is counted per window.
func TestAWindowIsASecondOfTheService(t *testing.T) {
	e := newEnv(t, partitions.Scaled(0.1))
	e.model.SetScale(0.1)
	hot := map[string]types.AttributeValue{"id": s("hot")}
	for i := range 1000 {
		if err := e.put(hot); err != nil {
			t.Fatalf("write %d of a second's 1,000: %v", i+1, err)
		}
	}
	throttled(t, e.put(hot), "TableWriteKeyRangeThroughputExceeded")
	e.clock.Advance(time.Second) // a tenth of the service's second: 100 units
	for i := range 100 {
		if err := e.put(hot); err != nil {
			t.Fatalf("write %d of the refill: %v", i+1, err)
		}
	}
	throttled(t, e.put(hot), "TableWriteKeyRangeThroughputExceeded")
	if top := e.model.Report(1).Keys[0]; top.Write.Peak != 1100 {
		t.Fatalf("peak %v, want 1,100 units in the window (its 10 s)", top.Write.Peak)
	}
}

// The slot items' protocol (dynamostore's takes, joins, pops, releases,
// a waiter leaving the list, a lease's end, and the release of an item
// written before its waiters were always present) is charged by the
// model, never refused as a nested path it cannot charge: the writes of
// a slot item's holders and waiters are one level deep and touch no
// index key.
func TestSlotItemsAreCharged(t *testing.T) {
	e := newEnv(t, partitions.Limits{})
	store := dynamostore.New(e.ddb, e.table, dynamostore.Config{Clock: e.clock})
	ctx := context.Background()
	now := e.clock.Now()
	claim := func(holder, waiter string, lease time.Duration) driver.SlotClaim {
		return driver.SlotClaim{Holder: holder, Waiter: waiter, Max: 1, LeaseUntil: now.Add(lease), At: now, Waiters: 4}
	}
	steps := []func() error{
		func() error { _, err := store.AcquireSlot(ctx, "k", claim("ta", "a", time.Minute)); return err }, // create
		func() error { _, err := store.AcquireSlot(ctx, "k", claim("tb", "b", time.Minute)); return err }, // take fails, join
		func() error {
			c := claim("tc", "c", time.Minute)
			c.ExpectFull = true
			_, err := store.AcquireSlot(ctx, "k", c) // join first
			return err
		},
		func() error { _, _, err := store.PopWaiter(ctx, "k", "ta"); return err },
		func() error { _, err := store.ReleaseSlot(ctx, "k", "ta"); return err },
		func() error { _, err := store.AcquireSlot(ctx, "k", claim("tb2", "b", time.Second)); return err }, // b takes it, c waits on
		func() error {
			now = now.Add(2 * time.Second) // b's lease ends: the next take drops it
			_, err := store.AcquireSlot(ctx, "k", claim("td", "d", time.Minute))
			return err
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if _, err := e.direct.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.table, Item: map[string]types.AttributeValue{
		"id": s(storekey.SlotPrefix + "old"), "h": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"t": n("99999999999999")}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ReleaseSlot(ctx, "old", "t"); err != nil {
		t.Fatalf("releasing an item without waiters: %v", err)
	}
	r := e.model.Report(-1)
	if r.ErrorCount != 0 {
		t.Fatalf("the model refused slot writes: %v", r.Errors)
	}
	charged := false
	for _, k := range r.Keys {
		if k.Index == "" && k.Key == storekey.SlotPrefix+"k" {
			charged = true
			if k.Write.Total < float64(len(steps)) {
				t.Fatalf("slot item charged %v write units for at least %d writes", k.Write.Total, len(steps))
			}
		}
	}
	if !charged {
		t.Fatalf("no charge for the slot item among %d keys", len(r.Keys))
	}
}

// A write whose outcome the model could not learn (it failed or timed out
// after DynamoDB may have applied it) leaves the item in doubt: the next
// write reads it, even on a table created through the model, rather than
// take it for absent (make reliability once mispredicted a batch shard
// so, a worker's count having timed out).
func TestAWriteInDoubtIsReadAgain(t *testing.T) {
	e := newEnv(t, partitions.Limits{WriteUnitsPerSecond: 1000, ReadUnitsPerSecond: 3000})
	// Landed, though the model did not see it land.
	if _, err := e.direct.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &e.table,
		Item: map[string]types.AttributeValue{"id": s("shard"), "jobs": n("3")}}); err != nil {
		t.Fatal(err)
	}
	partitions.Forget(e.model, "shard")
	if _, err := e.update("shard", expression.Set(expression.Name("expires"), expression.Value(5))); err != nil {
		t.Fatal(err)
	}
	if r := e.model.Report(-1); r.ErrorCount > 0 {
		t.Fatalf("the model mispredicted the item in doubt: %v", r.Errors)
	}
}
