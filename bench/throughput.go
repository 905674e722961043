package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// level is the local stack's throughput at one worker concurrency.
type level struct {
	Workers       int
	Jobs          int
	JobsPerSecond float64 // under load: as fast as 8 producers enqueue
	P50, P99      time.Duration
	// DrainPerSecond is the rate at which the workers empty a queue filled
	// beforehand: the worker side alone.
	DrainPerSecond float64
}

func goarch() string { return runtime.GOARCH }

// throughput runs the local stack (functions under the Runtime Interface
// Emulator, the event source at the given concurrency, batch size 10) and
// pushes n no-op jobs (example.hash, one round) through it as fast as 8
// producers can enqueue them.
func throughput(ctx context.Context, n int) ([]level, error) {
	root, err := localaws.FindRoot()
	if err != nil {
		return nil, err
	}
	var out []level
	for _, workers := range []int{1, 2, 4, 8} {
		l, err := throughputAt(ctx, root, workers, n)
		if err != nil {
			return nil, fmt.Errorf("%d workers: %w", workers, err)
		}
		fmt.Fprintf(os.Stderr, "bench: %d workers: %.0f jobs/s, p50 %v, p99 %v, drain %.0f jobs/s\n", workers, l.JobsPerSecond, l.P50, l.P99, l.DrainPerSecond)
		out = append(out, l)
	}
	return out, nil
}

func throughputAt(ctx context.Context, root string, workers, n int) (level, error) {
	l, _, err := runPhase(ctx, root, workers, n, false)
	if err != nil {
		return l, err
	}
	_, drain, err := runPhase(ctx, root, workers, n, true)
	l.DrainPerSecond = drain
	return l, err
}

// runPhase pushes n jobs through a fresh local stack. Paused: the queue is
// filled first and the rate is how fast the workers empty it.
func runPhase(ctx context.Context, root string, workers, n int, paused bool) (level, float64, error) {
	stack, err := localstack.Start(ctx, localstack.Config{
		Root: root, Bootstraps: filepath.Join(root, "build", "local"), RIE: filepath.Join(root, "bin", "aws-lambda-rie"),
		APIAddr: "127.0.0.1:0", Table: "bench", Queue: "bench",
		WorkerInstances: workers, BatchSize: 10, WorkerTimeout: 30 * time.Second, StartPaused: paused,
	})
	if err != nil {
		return level{}, 0, err
	}
	defer stack.Stop()
	ddb := localaws.DynamoDBClient(stack.DynamoDBEndpoint)
	store := dynamostore.New(ddb, stack.Table, dynamostore.Config{})
	reg := jobs.NewRegistry()
	hashes := jobs.MustRegister(reg, examplekinds.Hash, examplekinds.HashText, nil)
	sqsClient := localaws.SQSClient(stack.SQSEndpoint)
	qurl, err := sqsClient.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("bench")})
	if err != nil {
		return level{}, 0, err
	}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: sqsqueue.New(sqsClient, aws.ToString(qurl.QueueUrl))})
	if err != nil {
		return level{}, 0, err
	}
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += 8 {
				res, err := hashes.Enqueue(ctx, svc, "arn:aws:iam::000000000000:user/bench",
					examplekinds.HashPayload{Text: fmt.Sprint("job ", i), Rounds: 1}, nil)
				if err != nil {
					errs <- err
					return
				}
				ids[i] = res.Job.ID
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return level{}, 0, err
	}
	resumed := time.Now()
	stack.Resume()
	// Wait for every job, reading the table directly.
	done := map[string]*driver.Record{}
	deadline := time.Now().Add(5 * time.Minute)
	for len(done) < n {
		if time.Now().After(deadline) {
			return level{}, 0, fmt.Errorf("%d of %d jobs finished in 5 minutes", len(done), n)
		}
		for _, id := range ids {
			if done[id] != nil {
				continue
			}
			rec, err := store.Get(ctx, id)
			if err != nil {
				return level{}, 0, err
			}
			if rec.Status.Final() {
				if rec.Status != jobs.StatusSucceeded {
					return level{}, 0, fmt.Errorf("job %s %s", id, rec.Status)
				}
				done[id] = rec
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var lat []time.Duration
	first, last := time.Time{}, time.Time{}
	for _, rec := range done {
		lat = append(lat, rec.FinishedAt.Sub(rec.CreatedAt))
		if first.IsZero() || rec.CreatedAt.Before(first) {
			first = rec.CreatedAt
		}
		if rec.FinishedAt.After(last) {
			last = rec.FinishedAt
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	drain := float64(n) / last.Sub(resumed).Seconds()
	return level{
		Workers: workers, Jobs: n, JobsPerSecond: float64(n) / last.Sub(first).Seconds(),
		P50: lat[len(lat)/2], P99: lat[(len(lat)*99)/100],
	}, drain, nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
