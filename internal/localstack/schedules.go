package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// SchedulesPath is where the local stack lists the declared schedules and
// their next fire times (GET), for `ljob schedules`.
const SchedulesPath = "/local/schedules"

// ScheduleInfo is one schedule as SchedulesPath lists it.
type ScheduleInfo struct {
	jobs.Schedule
	NextFire time.Time `json:"next_fire"`
}

// Scheduler is the local stand-in for EventBridge Scheduler: it fires each
// declared schedule at its times, sending the message Scheduler's target
// would (jobs.FireMessage with the scheduled time), once per fire (AWS may
// deliver a fire more than once; the worker makes one job of it either
// way, which the jobs package's tests show with duplicates).
type Scheduler struct {
	Schedules []jobs.Schedule
	// Start anchors rate expressions, as a schedule's creation does.
	Start time.Time
	Send  func(ctx context.Context, body string) error
	Log   *slog.Logger

	mu   sync.Mutex
	next map[string]time.Time
}

// Run fires the schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, sc := range s.Schedules {
		wg.Add(1)
		go func() { defer wg.Done(); s.run(ctx, sc) }()
	}
	wg.Wait()
}

func (s *Scheduler) run(ctx context.Context, sc jobs.Schedule) {
	at := time.Now()
	for {
		next := sc.NextFire(at, s.Start)
		if next.IsZero() {
			return
		}
		s.mu.Lock()
		if s.next == nil {
			s.next = map[string]time.Time{}
		}
		s.next[sc.Name] = next
		s.mu.Unlock()
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := s.Send(ctx, jobs.FireMessage(sc.Name, next.UTC().Format(time.RFC3339))); err != nil && ctx.Err() == nil {
			s.Log.Warn("schedule fire not sent", slog.String("schedule", sc.Name), slog.String("error", err.Error()))
		}
		at = next
	}
}

// List returns the schedules with their next fire times.
func (s *Scheduler) List() []ScheduleInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ScheduleInfo, 0, len(s.Schedules))
	for _, sc := range s.Schedules {
		next, ok := s.next[sc.Name]
		if !ok {
			next = sc.NextFire(time.Now(), s.Start)
		}
		out = append(out, ScheduleInfo{Schedule: sc, NextFire: next.UTC()})
	}
	slices.SortFunc(out, func(a, b ScheduleInfo) int { return a.NextFire.Compare(b.NextFire) })
	return out
}

// ServeHTTP answers SchedulesPath.
func (s *Scheduler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"schedules": s.List()})
}

// declaredSchedules asks a bootstrap which schedules its registry declares
// (lambdafn prints them and exits when JOBS_PRINT_SCHEDULES=1).
func declaredSchedules(ctx context.Context, bootstrap string, env []string) ([]jobs.Schedule, error) {
	cmd := exec.CommandContext(ctx, bootstrap)
	cmd.Env = append(slices.Clone(env), "JOBS_FUNCTION=worker", "JOBS_PRINT_SCHEDULES=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("list the schedules of %s: %w: %s", bootstrap, err, errOut.String())
	}
	var list []jobs.Schedule
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		return nil, fmt.Errorf("list the schedules of %s: %w", bootstrap, err)
	}
	return list, nil
}

// sqsSender sends fire messages to the queue.
func sqsSender(client *sqs.Client, url string) func(context.Context, string) error {
	return func(ctx context.Context, body string) error {
		_, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(body)})
		return err
	}
}
