package dynamostore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Transaction conflicts.
//
// DynamoDB refuses a plain write to an item a transaction is writing with a
// TransactionConflictException: a job stored inside a team's own
// transaction (TransactPut) can meet one while that transaction runs. The
// SDK's standard retryer does not retry it. (The store itself writes no
// transactions: a batch job's count is a write of its own after its final
// write, so one batch's jobs never contend for an item.) DynamoDB Local
// serialises transactions and never answers it: the tests inject it
// (conflict_test.go, and the partition model of the reliability suite).
//
// The store retries it, with jittered exponential backoff, for as long as
// the caller's context allows (the worker bounds its final write). A
// retried write stays exact: every write is conditional (a job's on its
// status and claim token).

// Backoff between tries: base doubled per try, at most max, half of it
// random.
const (
	conflictBase = 20 * time.Millisecond
	conflictMax  = 500 * time.Millisecond
)

// retryable reports whether err is a conflict, a throttle or a server
// error that another try may cure: a plain write that met a transaction (or
// a transaction cancelled for no other reason), or a throttle or server
// error the SDK's retries did not get past.
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
	if errors.As(err, &tc) {
		return true
	}
	// A throttle or a server error the SDK's own tries (three, and its
	// retry quota) did not get past: a hot partition's throttles can last
	// longer than that, and a write given up early leaves a job whose
	// handler succeeded to end interrupted. Every write is conditional, and
	// one whose answer was lost is recognised when retried (engine.go), so
	// trying again until the caller's budget ends is safe.
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
			"InternalServerError", "ServiceUnavailable":
			return true
		}
	}
	return false
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

// updateItem runs one UpdateItem with conflict retries.
func (s *Store) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return withConflictRetries(ctx, func() (*dynamodb.UpdateItemOutput, error) { return s.api.UpdateItem(ctx, in) })
}

// putItem runs one PutItem with conflict retries.
func (s *Store) putItem(ctx context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
	return withConflictRetries(ctx, func() (*dynamodb.PutItemOutput, error) { return s.api.PutItem(ctx, in) })
}
