package dynamostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/testenv"
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
	plain := dynamostore.New(client, table, dynamostore.Options{})
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
	store := dynamostore.New(&laggingIndexAPI{API: client, stale: stale}, table, dynamostore.Options{})
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
