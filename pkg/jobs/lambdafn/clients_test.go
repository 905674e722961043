package lambdafn

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// Each function builds, at its start, the AWS clients its role uses on
// every invocation and no other; the clients only some invocations use are
// built at their first use, once. The environment is the one the construct
// gives every function (all of internal/deploy's construct variables),
// with the payload key ring and the page token key in Secrets Manager
// (moto), as deployed.
func TestEachRoleBuildsOnlyItsClients(t *testing.T) {
	sm, endpoint := motoSecretsAt(t)
	ctx := context.Background()
	for name, value := range map[string]string{"ring": strings.Repeat("r", 32), "page": strings.Repeat("p", 32)} {
		if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)}); err != nil {
			t.Fatal(err)
		}
	}
	sample := map[string]string{
		"JOBS_TABLE": "t", "JOBS_QUEUE_URL": "http://127.0.0.1:1/000000000000/q", "JOBS_DLQ_URL": "http://127.0.0.1:1/000000000000/dlq",
		"JOBS_DISPATCH_GRACE": "3m", "JOBS_RETENTION": "168h", "JOBS_WORKER_CONCURRENCY": "8", "JOBS_HANDLER_RESERVE": "3s",
		"JOBS_FINAL_WRITE_TIMEOUT": "2s", "JOBS_WORKER_TIMEOUT": "5m", "JOBS_PAYLOAD_KEYRING_SECRET": "ring", "JOBS_SOURCES": "",
		"JOBS_METRICS_NAMESPACE": "", "JOBS_TRACING": "off", "JOBS_SCHEDULE_GROUP": "g", "JOBS_QUEUE_ARN": "arn:aws:sqs:us-east-1:000000000000:q",
		"JOBS_SCHEDULER_ROLE_ARN": "arn:aws:iam::000000000000:role/s", "JOBS_SCHEDULE_DLQ_ARN": "arn:aws:sqs:us-east-1:000000000000:sdlq",
		"JOBS_SCHEDULE_MAX_EVENT_AGE": "1h", "JOBS_PAGE_TOKEN_SECRET": "page", "JOBS_OPERATORS": "arn:aws:iam::000000000000:role/ops", "JOBS_TRUSTED_CALLERS": "arn:aws:iam::000000000000:role/billing", "JOBS_ENQUEUE_RATE_PER_OWNER": "100", "JOBS_WAITS_PER_OWNER": "20",
		"JOBS_EVENT_BUS": "jobs-bus", "JOBS_EVENTS": "kinds", "JOBS_MESSAGE_FIRST": "on", "JOBS_BUCKET": "parts",
	}
	env := map[string]string{"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": endpoint, "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:1",
		"AWS_ENDPOINT_URL_EVENTBRIDGE": "http://127.0.0.1:1"}
	for _, name := range deploy.ConstructVars() {
		if name == "JOBS_FUNCTION" {
			continue
		}
		v, ok := sample[name]
		if !ok {
			t.Fatalf("the construct sets %s: give it a value here", name)
		}
		env[name] = v
	}
	const (
		ddb, sqsC, secrets, sched, eb = "DynamoDB", "SQS", "Secrets Manager", "Scheduler", "EventBridge"
	)
	// put is a job event's send: the roles that write outcomes make it.
	put := func(ctx context.Context, d *Deps) {
		_, _ = d.eventBus.Put(ctx, []driver.Event{{DetailType: "Job Finished", Detail: []byte(`{}`)}})
	}
	tests := []struct {
		name     string
		fn       Function
		atStart  []string
		firstUse func(ctx context.Context, d *Deps) // a call only some invocations make
		later    []string                           // what it adds
	}{
		{"enqueue", Enqueue, []string{ddb, sqsC, secrets}, nil, nil},
		{"getjob", GetJob, []string{ddb, secrets}, nil, nil},
		{"cancel", Cancel, []string{ddb, secrets}, func(ctx context.Context, d *Deps) {
			_ = d.Queue.Send(ctx, driver.Message{JobID: "x"})
			put(ctx, d)
		}, []string{sqsC, eb}},
		{"worker", Worker, []string{ddb, secrets}, func(ctx context.Context, d *Deps) {
			_ = d.Queue.Send(ctx, driver.Message{JobID: "x", Delay: time.Second})
			put(ctx, d)
		}, []string{sqsC, eb}},
		// Every sweep drains the dead-letter queues: SQS at the start.
		{"sweeper", Sweeper, []string{ddb, sqsC}, func(ctx context.Context, d *Deps) {
			_ = d.Queue.Send(ctx, driver.Message{JobID: "x"}, driver.Message{JobID: "y"})
			put(ctx, d)
		}, []string{eb}},
		{"schedules", Schedules, []string{ddb}, func(ctx context.Context, d *Deps) {
			_, _ = lazyScheduler{&d.clients.scheduler}.DeleteSchedule(ctx, nil)
		}, []string{sched}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "JOBS_FUNCTION" {
					return tt.name
				}
				return env[k]
			}
			cfg, err := ConfigFromEnv(getenv)
			if err != nil {
				t.Fatal(err)
			}
			awsCfg, err := awsConfigFromEnv(getenv)
			if err != nil {
				t.Fatal(err)
			}
			d, err := newDeps(cfg, awsCfg, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tt.fn(d, jobs.NewRegistry()); err != nil {
				t.Fatal(err)
			}
			if got := sorted(d.builtClients()); !slices.Equal(got, sorted(tt.atStart)) {
				t.Errorf("clients built at the start: got %v, want %v", got, sorted(tt.atStart))
			}
			if sends := slices.Contains(tt.later, eb); sends != (d.eventBus != nil) {
				t.Errorf("event bus set up: %v, want %v (only the roles that write outcomes send events)", d.eventBus != nil, sends)
			}
			if tt.firstUse == nil {
				return
			}
			cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			tt.firstUse(cctx, d)
			tt.firstUse(cctx, d)
			want := sorted(append(slices.Clone(tt.atStart), tt.later...))
			if got := sorted(d.builtClients()); !slices.Equal(got, want) {
				t.Errorf("clients built after two calls only some invocations make: got %v, want %v", got, want)
			}
		})
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// A throttled DynamoDB call is retried within the deadlines the calls run
// under: no wait between tries is longer than dynamoMaxBackoff (the
// client's default waits up to a second, then two, before retrying a
// throttle: a 2 s final write's budget spent asleep), there are
// dynamoMaxAttempts tries, and AWS_MAX_ATTEMPTS still sets their number.
func TestDynamoDBRetriesFitTheDeadlines(t *testing.T) {
	throttle := &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}
	for _, tc := range []struct {
		maxAttempts, want int
	}{{0, dynamoMaxAttempts}, {3, 3}} {
		d := &Deps{aws: aws.Config{Region: "us-east-1", RetryMaxAttempts: tc.maxAttempts}}
		r := d.dynamo().Options().Retryer
		if got := r.MaxAttempts(); got != tc.want {
			t.Errorf("AWS_MAX_ATTEMPTS %d: %d tries, want %d", tc.maxAttempts, got, tc.want)
		}
		if !r.IsErrorRetryable(throttle) {
			t.Fatal("a throttle is not retried")
		}
		var longest time.Duration
		for range 200 {
			for attempt := 1; attempt < r.MaxAttempts(); attempt++ {
				delay, err := r.RetryDelay(attempt, throttle)
				if err != nil {
					t.Fatal(err)
				}
				longest = max(longest, delay)
			}
		}
		if longest > dynamoMaxBackoff || longest < dynamoMaxBackoff/4 {
			t.Errorf("longest wait before retrying a throttle %v, want up to %v", longest, dynamoMaxBackoff)
		}
	}
	if got := dynamoRetryer(3).MaxAttempts(); got != 3 {
		t.Errorf("dynamoRetryer(3): %d tries", got)
	}
	// A program's own retryer (NewServiceWithConfig) stands.
	own := retry.AddWithMaxAttempts(retry.NewStandard(), 9)
	d := &Deps{aws: aws.Config{Region: "us-east-1", Retryer: func() aws.Retryer { return own }}}
	if got := d.dynamo().Options().Retryer.MaxAttempts(); got != 9 {
		t.Errorf("a configuration's own retryer: %d tries, want its 9", got)
	}
	// What the client would do without: the reason for the retryer.
	def := dynamodb.New(dynamodb.Options{Region: "us-east-1"}).Options().Retryer
	var longest time.Duration
	for range 200 {
		delay, _ := def.RetryDelay(2, throttle)
		longest = max(longest, delay)
	}
	if longest <= time.Second {
		t.Errorf("the SDK's default waits at most %v before its second retry of a throttle: is this retryer still needed?", longest)
	}
}

// The sweeper drains every lane's dead-letter queue: the default lane's
// (JOBS_DLQ_URL) and each other lane's (JOBS_LANE_DLQ_URLS), whose
// messages go back to their own lane's queue; without JOBS_DLQ_URL it
// drains none.
func TestSweeperDrainsEveryLanesDeadLetters(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"JOBS_TABLE": "t", "JOBS_QUEUE_URL": "https://sqs.example/q", "JOBS_DLQ_URL": "https://sqs.example/dlq",
		"JOBS_LANE_QUEUE_URLS": `{"bulk":"https://sqs.example/q-bulk"}`, "JOBS_LANE_DLQ_URLS": `{"bulk":"https://sqs.example/dlq-bulk"}`}
	build := func(vars map[string]string) jobs.Config {
		t.Helper()
		cfg, err := ConfigFromEnv(func(k string) string { return vars[k] })
		if err != nil {
			t.Fatal(err)
		}
		d, err := newDeps(cfg, aws.Config{Region: "us-east-1"}, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		jc, err := d.sweeperConfig(jobs.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return jc
	}
	cfg := build(vars)
	dl, ok := cfg.DeadLetters.(*sqsqueue.DeadLetters)
	if !ok {
		t.Fatalf("the sweeper's dead letters: %T, want *sqsqueue.DeadLetters", cfg.DeadLetters)
	}
	if got := dl.Lanes(); !slices.Equal(got, []string{"", "bulk"}) || dl.DLQURL != vars["JOBS_DLQ_URL"] || dl.LaneDLQURLs["bulk"] != "https://sqs.example/dlq-bulk" ||
		dl.QueueURL != vars["JOBS_QUEUE_URL"] || dl.LaneQueueURLs["bulk"] != "https://sqs.example/q-bulk" {
		t.Fatalf("the sweeper drains lanes %q from %+v", got, dl)
	}
	delete(vars, "JOBS_DLQ_URL")
	if cfg := build(vars); cfg.DeadLetters != nil {
		t.Fatalf("without JOBS_DLQ_URL the sweeper drains %v", cfg.DeadLetters)
	}
}
