package dynamostore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Transaction conflicts.
//
// DynamoDB cancels a transaction that touches an item another transaction
// is writing (reason TransactionConflict), or that is throttled inside
// (ThrottlingError, ProvisionedThroughputExceeded), with a
// TransactionCanceledException; and it refuses a plain write to an item a
// transaction is writing with a TransactionConflictException. The SDK's
// standard retryer retries neither. Two jobs of one batch that finish
// together conflict on their batch's item, so without a retry a job whose
// handler succeeded would stay running and end interrupted. DynamoDB Local
// serialises transactions and never answers either: the tests inject them
// (conflict_test.go and the reliability suite's fault proxy).
//
// The store retries both, with jittered exponential backoff, for as long as
// the caller's context allows (the worker bounds its final write). A
// retried write stays exact: nothing of a cancelled transaction was
// written, every write is conditional (a job's on its status and claim
// token), and each try is a new request with its own client request token.
// (A token is reused only by the SDK's own retries of one try: reusing it
// after a cancellation would replay the cancellation.)

// Backoff between tries: base doubled per try, at most max, half of it
// random.
const (
	conflictBase = 20 * time.Millisecond
	conflictMax  = 500 * time.Millisecond
)

// retryable reports whether err is a conflict or a throttle that a retry
// cures: a transaction cancelled for no other reason, or a plain write that
// met a transaction.
func retryable(err error) bool {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		cured := false
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "", "None":
			case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
				cured = true
			default:
				return false // a failed condition, a validation error: final
			}
		}
		return cured
	}
	var tc *types.TransactionConflictException
	return errors.As(err, &tc)
}

// withConflictRetries runs call until it succeeds, fails for another
// reason, or ctx has no time left for another try.
func withConflictRetries[T any](ctx context.Context, call func() (T, error)) (T, error) {
	d := conflictBase
	for {
		out, err := call()
		if err == nil || !retryable(err) {
			return out, err
		}
		wait := d/2 + rand.N(d/2+1)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return out, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return out, err
		}
		d = min(2*d, conflictMax)
	}
}

// transact runs one TransactWriteItems with conflict retries, each try a
// new request (its own client request token).
func (s *Store) transact(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
	return withConflictRetries(ctx, func() (*dynamodb.TransactWriteItemsOutput, error) {
		in.ClientRequestToken = nil // the SDK fills a fresh one
		return s.api.TransactWriteItems(ctx, in)
	})
}

// updateItem runs one UpdateItem with conflict retries.
func (s *Store) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return withConflictRetries(ctx, func() (*dynamodb.UpdateItemOutput, error) { return s.api.UpdateItem(ctx, in) })
}

// putItem runs one PutItem with conflict retries.
func (s *Store) putItem(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
	return withConflictRetries(ctx, func() (*dynamodb.PutItemOutput, error) { return s.api.PutItem(ctx, in) })
}
