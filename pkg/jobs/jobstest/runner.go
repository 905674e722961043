package jobstest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Runner is the whole job system in memory, for a team's tests: a
// [jobs.Service] to enqueue through (Kind.Enqueue, Service.Enqueue, a
// batch), and Work, which runs what was enqueued through a real
// [jobs.Worker] and [jobs.Sweeper], as the queue would deliver it. No test
// writes a queue message by hand.
//
// Kinds with jobs:"secret" payload fields work as in production: the Runner
// seals and opens them with a key of its own.
//
//	r, err := jobstest.NewRunner(reg)
//	res, err := receipts.Enqueue(ctx, r.Service, "team", Receipt{OrderID: "o-1"}, nil)
//	_, err = r.Work(ctx)
//	got, err := r.Service.Get(ctx, "team", res.Job.ID) // succeeded, with its result
//	evs := r.Bus.Events() // the outcome events consumers would get
type Runner struct {
	// Service enqueues and reads jobs.
	Service *jobs.Service
	// Clock is the system's time: advance it to bring delayed jobs and
	// retries due, then call Work again.
	Clock *Clock
	// Bus holds the outcome events the jobs announced, as the deployment's
	// event bus would get them (kinds with KindOpts.Events): Bus.Events()
	// after Work. A handler's test checks what its consumers will see.
	Bus *MemBus
	// Uploads holds the uploads (Service.StartUpload) of a Runner that
	// keeps objects (RunnerOpts.ObjectsOver): MemUploads.PutPart uploads
	// a part through a link StartUpload answered. Nil otherwise.
	Uploads *MemUploads

	queue   *runnerQueue
	worker  *jobs.Worker
	sweeper *jobs.Sweeper
}

// NewRunner returns a Runner over reg, its clock at Epoch. It puts reg to
// use: register every kind first.
func NewRunner(reg *jobs.Registry) (*Runner, error) { return NewRunnerWith(reg, RunnerOpts{}) }

// RunnerOpts configures NewRunnerWith.
type RunnerOpts struct {
	// ObjectsOver keeps payloads and final results over that many bytes
	// as objects, as a deployment with a bucket does (MemStore's
	// KeepObjectsOver), and takes uploads (Runner.Uploads). 0: none.
	ObjectsOver int
}

// NewRunnerWith is NewRunner with opts.
func NewRunnerWith(reg *jobs.Registry, opts RunnerOpts) (*Runner, error) {
	clock := NewClock(Epoch)
	store := NewMemStore(clock)
	var uploads *MemUploads
	if opts.ObjectsOver > 0 {
		store.KeepPayloadsApart(opts.ObjectsOver)
		store.KeepObjectsOver(opts.ObjectsOver)
		uploads, _ = store.Uploads().(*MemUploads)
	}
	q := &runnerQueue{clock: clock}
	key, pageKey := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(key)
	_, _ = rand.Read(pageKey)
	sealer, err := jobs.NewAESSealer(key)
	if err != nil {
		return nil, err
	}
	bus := &MemBus{}
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: q, Clock: clock, Sealer: sealer, PageTokenKey: pageKey, Bus: bus})
	if err != nil {
		return nil, err
	}
	return &Runner{Service: c.Service(), Clock: clock, Bus: bus, Uploads: uploads, queue: q, worker: c.Worker(), sweeper: c.Sweeper()}, nil
}

// Work delivers every message that is due, in batches of up to ten as SQS
// would, and the messages those runs send (retries, batch completions,
// jobs the handlers enqueue), until none is due; then it sweeps once (the
// sweeper sends jobs delayed beyond the queue's 15 minutes once they are
// due) and goes on while that found some. It returns how many deliveries
// it made. Jobs not yet due stay queued: advance Clock and call Work
// again.
func (r *Runner) Work(ctx context.Context) (int, error) {
	n := 0
	for range 1000 {
		due := r.queue.takeDue(10)
		if len(due) == 0 {
			if rep, err := r.sweeper.Sweep(ctx); err != nil {
				return n, fmt.Errorf("jobstest: sweep: %w", err)
			} else if rep.Resent == 0 && rep.Retried == 0 {
				return n, nil
			}
			continue
		}
		var ev events.SQSEvent
		for i, m := range due {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("jobstest-%d-%d", n, i), Body: message.Encode(m.JobID),
				MessageAttributes: message.EventAttributes(m)})
		}
		resp, err := r.worker.HandleSQS(ctx, ev)
		if err != nil {
			return n, fmt.Errorf("jobstest: worker: %w", err)
		}
		back := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			back[f.ItemIdentifier] = true
		}
		for i, m := range ev.Records {
			if back[m.MessageId] {
				back := due[i]
				back.Delay = time.Second // SQS would show it again after its visibility timeout
				r.queue.send(back)
			}
		}
		n += len(due)
	}
	return n, errors.New("jobstest: Work delivered 1000 batches and jobs are still due: a job that never settles?")
}

// runnerQueue is the Runner's queue: each message becomes visible at its
// send time plus its delay, on the Runner's clock.
type runnerQueue struct {
	clock *Clock
	mu    sync.Mutex
	msgs  []queued
}

type queued struct {
	m       driver.Message
	visible time.Time
}

func (q *runnerQueue) send(m driver.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, queued{m: m, visible: q.clock.Now().Add(m.Delay)})
}

func (q *runnerQueue) takeDue(max int) []driver.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	sort.SliceStable(q.msgs, func(i, j int) bool { return q.msgs[i].visible.Before(q.msgs[j].visible) })
	var ids []driver.Message
	rest := q.msgs[:0]
	for _, m := range q.msgs {
		if len(ids) < max && !m.visible.After(now) {
			ids = append(ids, m.m)
			continue
		}
		rest = append(rest, m)
	}
	q.msgs = rest
	return ids
}

// Send queues msgs, each visible after its delay; the Runner's worker
// serves every lane.
func (q *runnerQueue) Send(_ context.Context, msgs ...driver.Message) error {
	for _, m := range msgs {
		q.send(m)
	}
	return nil
}
