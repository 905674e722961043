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
// functions that enqueue have no page token key to sign one with); a
// service without the key refuses to make or open a batch's page token,
// with an error that is not the caller's, rather than an unsigned one.
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
	if got, err := svc.GetBatch(ctx, "o", b.ID, "", 200); err != nil || len(got.JobIDs) != 150 || got.NextPageToken != nil {
		t.Fatalf("one page of the whole batch: %+v %v", got, err)
	}
	for name, token := range map[string]string{"the first page's token": "", "a token": "100"} {
		_, err := svc.GetBatch(ctx, "o", b.ID, token, 0)
		if err == nil || errors.Is(err, jobs.ErrInvalidRequest) {
			t.Errorf("%s without a PageTokenKey: %v, want a configuration error", name, err)
		}
	}
}
