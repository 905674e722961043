// Package orderreceipt is the transactional-enqueue example: an order and
// the job that sends its receipt are written in one DynamoDB transaction, so
// the job exists exactly when the order does.
//
//	job, _ := receipts.Prepare(svc, owner, p, opts) // validated like POST /v1/jobs, nothing stored
//	put, _ := store.TransactPut(job)             // the job's conditional put
//	ddb.TransactWriteItems(order put, job put)   // both or neither
//	svc.Dispatch(ctx, job)                       // one SendMessage after the commit
//
// If the process dies between the commit and the dispatch, the sweeper sends
// the job after the dispatch grace. If the transaction is cancelled (here: the
// order already exists), there is no job and no message.
package orderreceipt

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// Order is what the shop stores.
type Order struct {
	ID    string
	Email string
	Cents int64
}

// Shop writes orders and enqueues their receipts.
type Shop struct {
	DDB         *dynamodb.Client
	OrdersTable string
	Jobs        *jobs.Service
	Store       *dynamostore.Store
	// Receipts is the receipt kind's handle, from its registration.
	Receipts jobs.Kind[examplekinds.ReceiptPayload]
	// Owner owns the receipt jobs (the service's own principal).
	Owner string
	// SkipDispatch simulates a crash between the commit and the dispatch.
	SkipDispatch bool
}

// ErrOrderExists: the order was placed before; nothing was written.
var ErrOrderExists = errors.New("order already exists")

// PlaceOrder writes the order and its receipt job in one transaction, then
// dispatches the job. It returns the job.
func (s *Shop) PlaceOrder(ctx context.Context, o Order) (*driver.Record, error) {
	job, err := s.Receipts.Prepare(s.Jobs, s.Owner,
		examplekinds.ReceiptPayload{OrderID: o.ID, Email: o.Email, Cents: o.Cents}, &jobs.EnqueueOpts{IdempotencyKey: "receipt-" + o.ID})
	if err != nil {
		return nil, err
	}
	jobPuts, err := s.Store.TransactPut(job) // the job's put first, then its payload's item if it has one
	if err != nil {
		return nil, err
	}
	orderPut := types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.OrdersTable),
		Item: map[string]types.AttributeValue{
			"id":             &types.AttributeValueMemberS{Value: o.ID},
			"email":          &types.AttributeValueMemberS{Value: o.Email},
			"cents":          &types.AttributeValueMemberN{Value: fmt.Sprint(o.Cents)},
			"receipt_job_id": &types.AttributeValueMemberS{Value: job.ID},
		},
		// The caller's own condition: an order is placed once.
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	}}
	_, err = s.DDB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: append([]types.TransactWriteItem{orderPut}, jobPuts...),
	})
	var tce *types.TransactionCanceledException
	switch {
	case errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed":
		return nil, ErrOrderExists
	case dynamostore.JobExists(err, 1):
		return nil, fmt.Errorf("receipt job %s already exists: %w", job.ID, err)
	case err != nil:
		return nil, err
	}
	if !s.SkipDispatch {
		// After the commit: one SendMessage. Should it fail, the sweeper
		// sends the job after the dispatch grace.
		_ = s.Jobs.Dispatch(ctx, job)
	}
	return job, nil
}

// CreateOrdersTable creates the example's orders table if it is missing.
func CreateOrdersTable(ctx context.Context, ddb *dynamodb.Client, name string) error {
	_, err := ddb.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return err
	}
	return nil
}
