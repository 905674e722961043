package dynamostore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// laggingIndexAPI answers queries of the attention index with one more
// entry: a job whose entry AWS has not removed yet (global secondary
// indexes are updated asynchronously; DynamoDB Local updates them at once).
type laggingIndexAPI struct {
	dynamostore.API
	stale map[string]types.AttributeValue
}

func (a *laggingIndexAPI) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := a.API.Query(ctx, in, opts...)
	pk := a.stale[dynamostore.AttrAttention].(*types.AttributeValueMemberS).Value
	if err == nil && aws.ToString(in.IndexName) == dynamostore.AttentionIndex && in.ExclusiveStartKey == nil {
		for _, v := range in.ExpressionAttributeValues {
			if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value == pk {
				out.Items = append(out.Items, a.stale) // in its own partition only
			}
		}
	}
	return out, err
}

// A job listed by a lagging attention index but no longer failed is not
// returned as failed (nor acted on by a bulk action over that filter).
func TestListChecksTheStatusBehindALaggingIndex(t *testing.T) {
	client := testenv.DynamoDB(t)
	table := testenv.NewTable(t, client)
	plain := dynamostore.New(client, table, dynamostore.Config{})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	owner := "arn:aws:iam::123456789012:user/alice"
	mk := func() *driver.Record {
		rec := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: owner, Status: jobs.StatusQueued, Payload: []byte(`{}`),
			CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(time.Minute)}
		if err := plain.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	failed, retried := mk(), mk()
	tok := wire.NewID()
	if _, err := plain.Claim(ctx, failed.ID, driver.Claim{Token: tok, At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := plain.Finish(ctx, failed.ID, tok, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	key := wire.OwnerKey(owner)
	stale := map[string]types.AttributeValue{
		dynamostore.AttrID:          &types.AttributeValueMemberS{Value: retried.ID},
		dynamostore.AttrAttention:   &types.AttributeValueMemberS{Value: dynamostore.ListKey(key, retried.ID)},
		dynamostore.AttrListCreated: &types.AttributeValueMemberS{Value: "0000000000001"},
	}
	store := dynamostore.New(&laggingIndexAPI{API: client, stale: stale}, table, dynamostore.Config{})
	page, err := store.List(ctx, driver.ListQuery{OwnerKey: key, Status: jobs.StatusFailed, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Records) != 1 || page.Records[0].ID != failed.ID {
		var ids []string
		for _, r := range page.Records {
			ids = append(ids, r.ID+" "+string(r.Status))
		}
		t.Fatalf("failed jobs listed: %v, want only %s", ids, failed.ID)
	}
}

// queriedKeys records, per index, the string values of every Query's
// expression (the partition key values among them).
type queriedKeys struct {
	dynamostore.API
	mu   sync.Mutex
	keys map[string]map[string]bool
}

func (q *queriedKeys) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	q.mu.Lock()
	ix := aws.ToString(in.IndexName)
	if q.keys[ix] == nil {
		q.keys[ix] = map[string]bool{}
	}
	for _, v := range in.ExpressionAttributeValues {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			q.keys[ix][s.Value] = true
		}
	}
	q.mu.Unlock()
	return q.API.Query(ctx, in, opts...)
}

// The owner and attention listings still read the owner's key alone, where
// its jobs from before the listing's shards are (a job of then is found,
// failed or not); the queued and running listings and the counts, whose
// indexes were created sharded, never query it (32 queries, not 33:
// docs/evidence/CAPACITY.md).
func TestOnlyTheOwnerAndAttentionListingsReadTheKeyFromBeforeTheShards(t *testing.T) {
	client := testenv.DynamoDB(t)
	table := testenv.NewTable(t, client)
	api := &queriedKeys{API: client, keys: map[string]map[string]bool{}}
	store := dynamostore.New(api, table, dynamostore.Config{})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	owner := "arn:aws:iam::123456789012:user/alice"
	key := wire.OwnerKey(owner)
	// Two jobs as a version before the shards left them: listed under the
	// owner's key alone, one of them failed (its attention entry too).
	var old []string
	for i := range 2 {
		rec := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: owner, Status: jobs.StatusQueued, Payload: []byte(`{}`),
			CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(time.Minute)}
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		upd := "SET lo = :k REMOVE uq"
		if i == 0 {
			tok := wire.NewID()
			if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: tok, At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			if err := store.Finish(ctx, rec.ID, tok, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			upd = "SET lo = :k, " + dynamostore.AttrAttention + " = :k"
		}
		if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key:              map[string]types.AttributeValue{dynamostore.AttrID: &types.AttributeValueMemberS{Value: rec.ID}},
			UpdateExpression: aws.String(upd), ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: key}},
		}); err != nil {
			t.Fatal(err)
		}
		old = append(old, rec.ID)
	}
	list := func(st jobs.Status) []string {
		t.Helper()
		page, err := store.List(ctx, driver.ListQuery{OwnerKey: key, Status: st, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range page.Records {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if got := list(""); len(got) != 2 {
		t.Errorf("the owner's listing found %v, want its 2 jobs from before the shards %v", got, old)
	}
	if got := list(jobs.StatusFailed); len(got) != 1 || got[0] != old[0] {
		t.Errorf("the failed listing found %v, want the failed job from before the shards %s", got, old[0])
	}
	list(jobs.StatusQueued)
	list(jobs.StatusRunning)
	if _, err := store.CountUnfinished(ctx, key, 100); err != nil {
		t.Fatal(err)
	}
	for ix, want := range map[string]bool{dynamostore.OwnerIndex: true, dynamostore.AttentionIndex: true, dynamostore.QueuedIndex: false, dynamostore.RunningIndex: false} {
		shards := 0
		for k := range api.keys[ix] {
			if strings.HasPrefix(k, key+"#") {
				shards++
			}
		}
		if got := api.keys[ix][key]; got != want || shards != dynamostore.ListShards {
			t.Errorf("%s: the owner's key alone queried %v (want %v), %d of its shards (want %d)", ix, got, want, shards, dynamostore.ListShards)
		}
	}
}

// A page whose query budget runs out before it takes anything does not
// skip an entry it had read: one job of a rare kind, the owner's newest,
// behind 800 older jobs of another kind that a kind filter reads and
// drops, is listed (before, the next page started below it).
func TestAListingWhoseBudgetRunsOutSkipsNothing(t *testing.T) {
	client := testenv.DynamoDB(t)
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	owner := "arn:aws:iam::123456789012:user/alice"
	create := func(kind string, at time.Time) string {
		rec := &driver.Record{ID: wire.NewID(), Kind: kind, Owner: owner, Status: jobs.StatusQueued, Payload: []byte(`{}`),
			CreatedAt: at, UpdatedAt: at, SweepAt: at.Add(time.Hour)}
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return rec.ID
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range 800 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			create("common", now.Add(-time.Duration(i+1)*time.Millisecond))
		}()
	}
	wg.Wait()
	rare := create("rare", now)
	q := driver.ListQuery{OwnerKey: wire.OwnerKey(owner), Kind: "rare", Limit: 1}
	var found []string
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("the listing never ended")
		}
		page, err := store.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			found = append(found, r.ID)
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	if len(found) != 1 || found[0] != rare {
		t.Fatalf("listed %v, want the rare job %s", found, rare)
	}
}
