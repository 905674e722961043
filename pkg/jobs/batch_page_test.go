package jobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// EnqueueBatch answers every job id of the batch and no page token (the
// functions that enqueue have no page token key to sign one with). A
// service without the key answers a batch's counts and first page with no
// token for the next, and refuses a token with an error that is not the
// caller's, rather than trusting an unsigned one.
func TestBatchAnswerListsEveryJobAndPagesNeedTheKey(t *testing.T) {
	t.Parallel()
	store := jobstest.NewMemStore(nil)
	svc := sealedService(t, store, nil, newKey(t)) // no PageTokenKey
	ctx := context.Background()
	b, _, err := enqueuedBatch(svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: "o", Jobs: batchOf(150, "a")}))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.JobIDs) != 150 || b.JobIDs[149] != wire.BatchJobID(b.ID, 149) || b.NextPageToken != nil {
		t.Fatalf("the batch's answer: %d job ids, token %v; want all 150 and no token", len(b.JobIDs), b.NextPageToken)
	}
	got, err := svc.GetBatch(ctx, "o", b.ID, "", 0)
	if err != nil || got.Total != 150 || got.Counts.Pending != 150 || len(got.JobIDs) != 100 || got.NextPageToken != nil {
		t.Fatalf("the batch's first page without a key: %+v %v; want its counts, 100 ids and no token", got, err)
	}
	if _, err := svc.GetBatch(ctx, "o", b.ID, "100", 0); err == nil || errors.Is(err, jobs.ErrInvalidRequest) {
		t.Errorf("a token without a PageTokenKey: %v, want a configuration error", err)
	}
}
