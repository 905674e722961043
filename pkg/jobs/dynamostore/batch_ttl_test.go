package dynamostore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// A batch's shard counts carry no TTL while the batch runs: its jobs may
// end further apart than the retention, and DynamoDB would delete a shard
// counted early before the batch could settle, which then never ends.
// Ending the batch gives each shard the batch's expiry. (DynamoDB Local
// never deletes expired items, so the test reads the TTL attribute.)
func TestBatchShardsExpireOnlyWithTheirBatch(t *testing.T) {
	client := testenv.DynamoDB(t)
	table := testenv.NewTable(t, client)
	clock := jobstest.NewClock(time.Now().Truncate(time.Second))
	store := dynamostore.New(client, table, dynamostore.Config{Clock: clock})
	ctx := context.Background()
	now := clock.Now()
	id := wire.NewID()
	b := &driver.Batch{ID: id, Owner: "o", Status: jobs.StatusRunning, Total: 2, Shards: 2, Creating: true, CreatedAt: now, SweepAt: now.Add(time.Minute)}
	if _, err := store.CreateBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := store.OpenBatch(ctx, id); err != nil {
		t.Fatal(err)
	}
	shardTTL := func(shard int) (int64, bool) {
		t.Helper()
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{dynamostore.AttrID: &types.AttributeValueMemberS{Value: storekey.BatchShardPrefix + id + "#" + strconv.Itoa(shard)}}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Item == nil {
			t.Fatalf("shard %d has no item", shard)
		}
		v, ok := out.Item[dynamostore.AttrExpires].(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n, true
	}
	for i := range 2 {
		if _, err := store.CountInBatch(ctx, b, driver.BatchCount{Index: i, Status: jobs.StatusSucceeded, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.ShardDone(ctx, id, i); err != nil {
			t.Fatal(err)
		}
		if ttl, ok := shardTTL(i); ok {
			t.Fatalf("shard %d of a running batch expires at %v: it may be deleted before its batch settles", i, time.Unix(ttl, 0).Sub(now))
		}
	}
	end := now.Add(48 * time.Hour)
	if err := store.EndBatch(ctx, id, jobs.StatusSucceeded, now, end); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if ttl, ok := shardTTL(i); !ok || ttl != end.Unix() {
			t.Fatalf("shard %d of an ended batch: TTL %v (set %v), want the batch's, %v", i, ttl, ok, end.Unix())
		}
	}
}
