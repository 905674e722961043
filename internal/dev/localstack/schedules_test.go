package localstack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/schedulerapi"
)

// The local scheduler fires each schedule at its times, with the scheduled
// time in the message, as Scheduler's target input would carry it.
func TestSchedulerFiresAtTheScheduledTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var fires []wire.Fire
		s := &Scheduler{
			Schedules: []jobs.Schedule{
				{Name: "tick", Expression: "rate(1 minute)", TimeZone: "UTC"},
				{Name: "quarter", Expression: "cron(*/15 * * * ? *)", TimeZone: "UTC"},
			},
			Start: start,
			Send: func(_ context.Context, body string) error {
				var f wire.Fire
				if err := json.Unmarshal([]byte(body), &f); err != nil {
					t.Errorf("fire %q: %v", body, err)
				}
				mu.Lock()
				fires = append(fires, f)
				mu.Unlock()
				return nil
			},
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		time.Sleep(150 * time.Second)
		synctest.Wait()
		mu.Lock()
		ticks := 0
		for _, f := range fires {
			at, err := time.Parse(time.RFC3339, f.ScheduledTime)
			if err != nil {
				t.Fatalf("scheduled time %q", f.ScheduledTime)
			}
			if f.Schedule == "tick" {
				ticks++
				if want := start.Add(time.Duration(ticks) * time.Minute).UTC().Truncate(time.Second); !at.Equal(want) {
					t.Errorf("tick %d at %v, want %v", ticks, at, want)
				}
			}
		}
		mu.Unlock()
		if ticks != 2 {
			t.Fatalf("%d ticks in 2.5 minutes, want 2: %+v", ticks, fires)
		}
		l := s.List()
		if len(l) != 2 || l[0].Name != "tick" || !l[0].NextFire.Equal(start.Add(3*time.Minute).UTC()) {
			t.Fatalf("list %+v", l)
		}
		if last := start.Add(2 * time.Minute).UTC(); l[0].LastFire == nil || !l[0].LastFire.Equal(last) || l[0].LastJobID != wire.FireJobID("tick", last) {
			t.Fatalf("last fire %v %q", l[0].LastFire, l[0].LastJobID)
		}
		cancel()
		<-done
	})
}

// The local Scheduler's API serves what the schedules function calls to
// its real client (schedulerapi over the AWS SDK): create, get (the
// schedule as created, whatever its dates), update and delete; and it
// records each call as IAM authorises it, GetSchedule and UpdateSchedule
// included, so the deployed grants are checked against them.
func TestSchedulerAPIServesTheSchedulesFunction(t *testing.T) {
	dir := t.TempDir()
	rec, err := iamcalls.NewRecorder(dir)
	if err != nil {
		t.Fatal(err)
	}
	local := &Scheduler{}
	mux := http.NewServeMux()
	mux.Handle(SchedulerAPIPrefix, SchedulerAPI{Scheduler: local, Calls: rec})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := scheduler.New(scheduler.Options{Region: localaws.Region, BaseEndpoint: aws.String(srv.URL), Credentials: localaws.As("schedules")})
	api, err := schedulerapi.New(client, schedulerapi.Config{Group: RuntimeGroup, QueueARN: "arn:aws:sqs:us-east-1:000000000000:jobs",
		RoleARN: "arn:aws:iam::000000000000:role/scheduler", DLQARN: "arn:aws:sqs:us-east-1:000000000000:schedule-dlq"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sc := jobs.Schedule{Name: "nightly", Expression: "cron(0 2 * * ? *)", TimeZone: "Europe/Paris", Kind: "example.hash"}
	msg := wire.RuntimeFireMessage("0123456789abcdef", "nightly", wire.ScheduledTimeAttribute)
	const id = "0123456789abcdef-nightly"
	if _, err := api.GetSchedule(ctx, id); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("get of none: %v", err)
	}
	if err := api.CreateSchedule(ctx, id, sc, msg); err != nil {
		t.Fatal(err)
	}
	if err := api.CreateSchedule(ctx, id, sc, msg); !errors.Is(err, driver.ErrExists) {
		t.Fatalf("create again: %v", err)
	}
	h, err := api.GetSchedule(ctx, id)
	if err != nil || !h.TargetMatches || h.Expression != sc.Expression || h.TimeZone != sc.TimeZone || h.Message != msg {
		t.Fatalf("get: %+v %v", h, err)
	}
	sc.Expression = "rate(5 minutes)"
	if err := api.UpdateSchedule(ctx, id, sc, msg); err != nil {
		t.Fatal(err)
	}
	if h, err := api.GetSchedule(ctx, id); err != nil || h.Expression != "rate(5 minutes)" || !h.TargetMatches {
		t.Fatalf("get after update: %+v %v", h, err)
	}
	if l := local.List(); len(l) != 1 || l[0].Expression != "rate(5 minutes)" || l[0].Group != RuntimeGroup {
		t.Fatalf("the local Scheduler fires %+v", l)
	}
	if err := api.DeleteSchedule(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := api.UpdateSchedule(ctx, id, sc, msg); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("update of none: %v", err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	calls, err := iamcalls.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.Principal+" "+c.Action+" "+c.Resource] = true
	}
	for _, want := range []string{
		"schedules scheduler:CreateSchedule schedule/runtime/*", "schedules scheduler:GetSchedule schedule/runtime/*",
		"schedules scheduler:UpdateSchedule schedule/runtime/*", "schedules scheduler:DeleteSchedule schedule/runtime/*",
		"schedules iam:PassRole role/scheduler",
	} {
		if !seen[want] {
			t.Errorf("not recorded: %s (recorded %v)", want, calls)
		}
	}
}
