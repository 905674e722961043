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
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// SchedulesPath is where the local stack lists the schedules it fires and
// their next fire times (GET), for `ljob schedules`.
const SchedulesPath = "/local/schedules"

// Groups of the local schedules, named as the construct would name them
// with Config.NamePrefix "lambdajobs-local" (in AWS it derives them from
// the stack unless told a prefix; the schedules function reads its group
// from JOBS_SCHEDULE_GROUP either way).
const (
	DeclaredGroup = "lambdajobs-local"
	RuntimeGroup  = "lambdajobs-local-runtime"
)

// ScheduleInfo is one schedule as SchedulesPath lists it: a declared one
// in full, a runtime one as Scheduler knows it (its name is the owner's
// key and the schedule's name; see wire.SchedulerName).
type ScheduleInfo struct {
	jobs.Schedule
	Group    string    `json:"group"`
	NextFire time.Time `json:"next_fire"`
	// LastFire and LastJobID: the last fire sent and the job it makes.
	LastFire  *time.Time `json:"last_fire,omitempty"`
	LastJobID string     `json:"last_job_id,omitempty"`
}

// Scheduler is the local stand-in for EventBridge Scheduler: it fires each
// schedule at its times, sending its target input with the scheduled-time
// context attribute filled in, as Scheduler does, once per fire (AWS may
// deliver a fire more than once; the worker makes one job of it either
// way, which the jobs package's tests show with duplicates). It holds the
// declared schedules and those the schedules function creates through
// SchedulerAPI.
type Scheduler struct {
	Schedules []jobs.Schedule
	// Start anchors the declared rate expressions, as a schedule's
	// creation does.
	Start time.Time
	Send  func(ctx context.Context, body string) error
	Log   *slog.Logger

	mu      sync.Mutex
	entries map[string]*entry // group + "/" + name
	runCtx  context.Context
	wg      sync.WaitGroup
}

type entry struct {
	group    string
	schedule jobs.Schedule // Name, Expression, TimeZone, CreatedAt; all of it for a declared one
	input    string
	def      scheduleBody // as created or last updated through SchedulerAPI
	next     time.Time
	last     time.Time
	cancel   context.CancelFunc
}

// jobID is the id of the job the fire at at makes.
func (e *entry) jobID(at time.Time) string {
	var f wire.Fire
	if err := json.Unmarshal([]byte(e.input), &f); err != nil {
		return ""
	}
	if f.OwnerKey != "" {
		return wire.RuntimeFireJobID(f.OwnerKey, f.Schedule, at)
	}
	return wire.FireJobID(f.Schedule, at)
}

func (s *Scheduler) init() {
	if s.entries != nil {
		return
	}
	s.entries = map[string]*entry{}
	for _, sc := range s.Schedules {
		sc.CreatedAt = s.Start
		s.entries[DeclaredGroup+"/"+sc.Name] = &entry{group: DeclaredGroup, schedule: sc, input: wire.FireMessage(sc.Name, wire.ScheduledTimeAttribute)}
	}
}

// Run fires the schedules until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	s.mu.Lock()
	s.init()
	s.runCtx = ctx
	for _, e := range s.entries {
		s.startLocked(e)
	}
	s.mu.Unlock()
	<-ctx.Done()
	s.wg.Wait()
}

func (s *Scheduler) startLocked(e *entry) {
	if s.runCtx == nil || e.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(s.runCtx)
	e.cancel = cancel
	s.wg.Add(1)
	go func() { defer s.wg.Done(); s.run(ctx, e) }()
}

func (s *Scheduler) run(ctx context.Context, e *entry) {
	at := time.Now()
	for {
		next := e.schedule.NextFire(at, e.schedule.CreatedAt)
		if next.IsZero() {
			return
		}
		s.mu.Lock()
		e.next = next
		s.mu.Unlock()
		t := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		body := strings.ReplaceAll(e.input, wire.ScheduledTimeAttribute, next.UTC().Format(time.RFC3339))
		if err := s.Send(ctx, body); err != nil {
			if ctx.Err() == nil && s.Log != nil {
				s.Log.Warn("schedule fire not sent", slog.String("schedule", e.schedule.Name), slog.String("error", err.Error()))
			}
		} else {
			s.mu.Lock()
			e.last = next.UTC().Truncate(time.Second)
			s.mu.Unlock()
		}
		at = next
	}
}

// add creates a schedule in group; false when one of that name exists.
func (s *Scheduler) add(group string, sc jobs.Schedule, def scheduleBody) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	key := group + "/" + sc.Name
	if _, ok := s.entries[key]; ok {
		return false
	}
	e := &entry{group: group, schedule: sc, input: def.Target.Input, def: def}
	s.entries[key] = e
	s.startLocked(e)
	return true
}

// replace updates a schedule in group (it keeps its creation time); false
// when there is none.
func (s *Scheduler) replace(group string, sc jobs.Schedule, def scheduleBody) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	key := group + "/" + sc.Name
	old, ok := s.entries[key]
	if !ok {
		return false
	}
	if old.cancel != nil {
		old.cancel()
	}
	sc.CreatedAt = old.schedule.CreatedAt
	e := &entry{group: group, schedule: sc, input: def.Target.Input, def: def}
	s.entries[key] = e
	s.startLocked(e)
	return true
}

// remove deletes a schedule; false when there is none.
func (s *Scheduler) remove(group, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	e, ok := s.entries[group+"/"+name]
	if !ok {
		return false
	}
	if e.cancel != nil {
		e.cancel()
	}
	delete(s.entries, group+"/"+name)
	return true
}

// get returns a schedule's definition and creation time.
func (s *Scheduler) get(group, name string) (scheduleBody, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	e, ok := s.entries[group+"/"+name]
	if !ok {
		return scheduleBody{}, time.Time{}, false
	}
	return e.def, e.schedule.CreatedAt, true
}

// List returns the schedules with their next fire times, soonest first.
func (s *Scheduler) List() []ScheduleInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	out := make([]ScheduleInfo, 0, len(s.entries))
	for _, e := range s.entries {
		next := e.next
		if next.IsZero() {
			next = e.schedule.NextFire(time.Now(), e.schedule.CreatedAt)
		}
		info := ScheduleInfo{Schedule: e.schedule, Group: e.group, NextFire: next.UTC()}
		if !e.last.IsZero() {
			last := e.last
			info.LastFire, info.LastJobID = &last, e.jobID(last)
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b ScheduleInfo) int {
		if c := a.NextFire.Compare(b.NextFire); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// ServeHTTP answers SchedulesPath.
func (s *Scheduler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"schedules": s.List()})
}

// SchedulerAPI serves the part of EventBridge Scheduler's API that the
// schedules function calls (CreateSchedule, GetSchedule, UpdateSchedule,
// DeleteSchedule), in the service's own REST protocol, so the function
// runs its real AWS client against the local Scheduler
// (AWS_ENDPOINT_URL_SCHEDULER). It fires what firing needs and answers
// GetSchedule with what was created; it enforces no IAM, and never uses
// the role or the dead-letter queue.
type SchedulerAPI struct {
	Scheduler *Scheduler
	// Calls, when set, records each call as IAM authorises it (package
	// iamcalls): the schedule operation on the group's schedules, and
	// passing the scheduler role to Scheduler with a create or an update.
	Calls *iamcalls.Recorder
}

// group is how the deployment knows a schedule group.
func (a SchedulerAPI) group(name string) string {
	if name == RuntimeGroup {
		return "runtime"
	}
	return name
}

// SchedulerAPIPrefix is the path of Scheduler's schedule operations.
const SchedulerAPIPrefix = "/schedules/"

// scheduleBody is a schedule as CreateSchedule and UpdateSchedule send it
// and GetSchedule answers it (the fields the schedules function sets).
type scheduleBody struct {
	GroupName                  string `json:",omitempty"`
	ScheduleExpression         string
	ScheduleExpressionTimezone string `json:",omitempty"`
	State                      string `json:",omitempty"`
	Description                string `json:",omitempty"`
	ActionAfterCompletion      string `json:",omitempty"`
	FlexibleTimeWindow         *struct {
		Mode                   string
		MaximumWindowInMinutes *int `json:",omitempty"`
	} `json:",omitempty"`
	Target struct {
		Arn              string `json:",omitempty"`
		RoleArn          string `json:",omitempty"`
		Input            string
		DeadLetterConfig *struct{ Arn string } `json:",omitempty"`
		RetryPolicy      *struct {
			MaximumEventAgeInSeconds int
			MaximumRetryAttempts     int
		} `json:",omitempty"`
	}
}

func (a SchedulerAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, SchedulerAPIPrefix)
	fail := func(status int, typ, msg string) {
		w.Header().Set("X-Amzn-ErrorType", typ)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"Message": msg})
	}
	if name == "" || strings.Contains(name, "/") {
		fail(http.StatusNotFound, "ResourceNotFoundException", "no such operation")
		return
	}
	principal := iamcalls.PrincipalOf(r)
	arn := func(group string) string {
		return "arn:aws:scheduler:us-east-1:" + LocalAccount + ":schedule/" + group + "/" + name
	}
	// record records the schedule operation, and passing the role with a
	// create or an update.
	record := func(action, group string) {
		calls := []iamcalls.Call{{Principal: principal, Action: action, Resource: "schedule/" + a.group(group) + "/*"}}
		if r.Method == http.MethodPost || r.Method == http.MethodPut {
			calls = append(calls, iamcalls.Call{Principal: principal, Action: "iam:PassRole", Resource: "role/scheduler",
				Context: map[string]string{"iam:PassedToService": "scheduler.amazonaws.com"}})
		}
		a.Calls.Record(calls...)
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut:
		create := r.Method == http.MethodPost
		var in scheduleBody
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.ScheduleExpression == "" || in.Target.Input == "" {
			fail(http.StatusBadRequest, "ValidationException", "a schedule needs an expression and a target input")
			return
		}
		group := groupOr(in.GroupName)
		in.GroupName = group
		if create {
			record("scheduler:CreateSchedule", group)
		} else {
			record("scheduler:UpdateSchedule", group)
		}
		if in.ScheduleExpressionTimezone == "" {
			in.ScheduleExpressionTimezone = "UTC"
		}
		if in.State == "" {
			in.State = "ENABLED"
		}
		sc := jobs.Schedule{Name: name, Expression: in.ScheduleExpression, TimeZone: in.ScheduleExpressionTimezone, CreatedAt: time.Now()}
		if err := sc.Check(); err != nil {
			fail(http.StatusBadRequest, "ValidationException", err.Error())
			return
		}
		switch {
		case create && !a.Scheduler.add(group, sc, in):
			fail(http.StatusConflict, "ConflictException", fmt.Sprintf("schedule %s already exists", name))
			return
		case !create && !a.Scheduler.replace(group, sc, in):
			fail(http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("schedule %s does not exist", name))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"ScheduleArn": arn(group)})
	case http.MethodGet:
		group := groupOr(r.URL.Query().Get("groupName"))
		record("scheduler:GetSchedule", group)
		def, created, ok := a.Scheduler.get(group, name)
		if !ok {
			fail(http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("schedule %s does not exist", name))
			return
		}
		// GetSchedule's answer: the definition, its name, ARN and dates
		// (epoch seconds, as the service sends them).
		out := struct {
			scheduleBody
			Name                 string
			Arn                  string
			CreationDate         float64
			LastModificationDate float64
		}{def, name, arn(group), float64(created.Unix()), float64(created.Unix())}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	case http.MethodDelete:
		group := groupOr(r.URL.Query().Get("groupName"))
		record("scheduler:DeleteSchedule", group)
		if !a.Scheduler.remove(group, name) {
			fail(http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("schedule %s does not exist", name))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	default:
		fail(http.StatusMethodNotAllowed, "ValidationException", "only CreateSchedule, GetSchedule, UpdateSchedule and DeleteSchedule are served locally")
	}
}

func groupOr(g string) string {
	if g == "" {
		return "default"
	}
	return g
}

// declaredSchedules asks a bootstrap which schedules its registry declares
// (lambdafn prints them and exits when JOBS_PRINT_SCHEDULES=1).
func declaredSchedules(ctx context.Context, bootstrap string, env []string) ([]jobs.Schedule, error) {
	cmd := exec.CommandContext(ctx, bootstrap)
	cmd.Env = append(slices.Clone(env), deploy.EnvPrintSchedules.Name+"=1")
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
