package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type ResizePayload struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

type ResizeResult struct {
	Location  string // public
	SignedURL string // private: never stored
}

func (r ResizeResult) PublicJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"location": r.Location})
}

func resize(ctx context.Context, job *jobs.Job[ResizePayload]) (ResizeResult, error) {
	if job.Payload.Width <= 0 {
		return ResizeResult{}, jobs.Fail("bad_width", nil)
	}
	if err := job.Publish(ctx, jobs.JSON[map[string]int]{V: map[string]int{"percent": 50}}); err != nil {
		return ResizeResult{}, err
	}
	return ResizeResult{Location: fmt.Sprintf("s3://thumbs/%d/a.png", job.Payload.Width), SignedURL: "https://secret"}, nil
}

// Register a kind, enqueue jobs with its typed handle and run them. Here
// jobstest.Runner plays the queue and the worker Lambda; in production,
// lambdafn builds the functions over DynamoDB and SQS.
func Example() {
	reg := jobs.NewRegistry()
	resizes := jobs.MustRegister(reg, "image.resize", resize, &jobs.KindOpts{FailureCodes: []string{"bad_width"}})
	r, _ := jobstest.NewRunner(reg)
	ctx := context.Background()

	good, _ := resizes.Enqueue(ctx, r.Service, "alice", ResizePayload{URL: "s3://in/a.png", Width: 64}, nil)
	bad, _ := resizes.Enqueue(ctx, r.Service, "alice", ResizePayload{URL: "s3://in/b.png"}, nil)
	fmt.Println(good.Job.Status)
	_, _ = r.Work(ctx)

	done, _ := r.Service.Get(ctx, "alice", good.Job.ID)
	fmt.Println(done.Status, string(done.Result))
	failed, _ := r.Service.Get(ctx, "alice", bad.Job.ID)
	fmt.Println(failed.Status, *failed.Error)
	// Output:
	// queued
	// succeeded {"location":"s3://thumbs/64/a.png"}
	// failed bad_width
}

// Register infers the payload and result types from the handler; options
// declare the failure codes the handler may return and the retry policy.
func ExampleRegister() {
	reg := jobs.NewRegistry()
	_, err := jobs.Register(reg, "image.resize", resize, &jobs.KindOpts{
		FailureCodes: []string{"bad_width"},
		Retry:        jobs.RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Second},
	})
	fmt.Println(err)
	_, err = jobs.Register(reg, "image.resize", resize, nil)
	fmt.Println(err)
	// Output:
	// <nil>
	// jobs: kind already registered: "image.resize"
}

// An enqueue with an idempotency key returns the first job when it is
// retried; the same key with another payload is refused.
func ExampleKind_Enqueue() {
	reg := jobs.NewRegistry()
	resizes := jobs.MustRegister(reg, "image.resize", resize, nil)
	r, _ := jobstest.NewRunner(reg)
	ctx := context.Background()
	opts := &jobs.EnqueueOpts{IdempotencyKey: "thumb-a"}

	first, _ := resizes.Enqueue(ctx, r.Service, "alice", ResizePayload{URL: "s3://in/a.png", Width: 64}, opts)
	again, _ := resizes.Enqueue(ctx, r.Service, "alice", ResizePayload{URL: "s3://in/a.png", Width: 64}, opts)
	fmt.Println(again.Job.ID == first.Job.ID, again.Replayed)
	_, err := resizes.Enqueue(ctx, r.Service, "alice", ResizePayload{URL: "s3://in/a.png", Width: 128}, opts)
	fmt.Println(errors.Is(err, jobs.ErrIdempotencyConflict))
	// Output:
	// true true
	// true
}

// A request the service refuses stores nothing; its error says why, in
// words safe to return to the caller.
func ExampleService_Enqueue() {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "image.resize", resize, nil)
	r, _ := jobstest.NewRunner(reg)
	ctx := context.Background()

	_, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "image.resize",
		Payload: json.RawMessage(`{"url":"s3://in/a.png","width":64,"height":64}`)})
	var pe *jobs.PayloadError
	fmt.Println(errors.Is(err, jobs.ErrInvalidRequest), errors.As(err, &pe) && pe.Reason == `unknown field "height"`)

	_, err = r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "image.crop", Payload: json.RawMessage(`{}`)})
	var re *jobs.RequestError
	fmt.Println(errors.As(err, &re), re.Code)
	// Output:
	// true true
	// true unknown_kind
}

// Retry asks for another attempt under the kind's retry policy: the job
// goes back to the queue and runs again after the backoff.
func ExampleRetry() {
	reg := jobs.NewRegistry()
	calls := 0
	flaky := jobs.MustRegister(reg, "flaky", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.JSON[int], error) {
		calls++
		if job.Attempt == 1 {
			return jobs.JSON[int]{}, jobs.RetryAfter(time.Minute, errors.New("upstream busy"))
		}
		return jobs.JSON[int]{V: job.Attempt}, nil
	}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 3}})
	r, _ := jobstest.NewRunner(reg)
	ctx := context.Background()
	res, _ := flaky.Enqueue(ctx, r.Service, "alice", struct{}{}, nil)

	_, _ = r.Work(ctx)
	v, _ := r.Service.Get(ctx, "alice", res.Job.ID)
	fmt.Println(v.Status, *v.LastError)
	r.Clock.Advance(time.Minute)
	_, _ = r.Work(ctx)
	v, _ = r.Service.Get(ctx, "alice", res.Job.ID)
	fmt.Println(v.Status, string(v.Result), calls)
	// Output:
	// queued internal_error
	// succeeded 2 2
}

// Every declares a schedule next to its kind; the CDK construct deploys
// each declared schedule (JobsProps.Schedules: reg.Schedules()).
func ExampleKind_Every() {
	reg := jobs.NewRegistry()
	resizes := jobs.MustRegister(reg, "image.resize", resize, nil)
	err := resizes.Every(reg, "nightly-thumbs", "cron(0 2 * * ? *)", ResizePayload{URL: "s3://in/", Width: 64},
		&jobs.ScheduleOpts{TimeZone: "Europe/Paris", Owner: "ops"})
	fmt.Println(err)
	for _, s := range reg.Schedules() {
		fmt.Println(s.Name, s.Expression, s.TimeZone, s.Owner, string(s.Payload))
	}
	// Output:
	// <nil>
	// nightly-thumbs cron(0 2 * * ? *) Europe/Paris ops {"url":"s3://in/","width":64}
}
