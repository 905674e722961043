package lambdafn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// A function builds the AWS clients its role uses, and no other: at its
// start those every invocation needs (DynamoDB for all; SQS for enqueue,
// which sends each job; Secrets Manager when a key is read from it at
// start), at first use those only some invocations need (SQS for the
// worker's retries and hand-backs, the sweeper's re-sends and cancel's
// retries and redrives; Scheduler for the schedules function's writes),
// and never the others (SQS for getjob and schedules, Scheduler but for
// schedules; EventBridge for the job events of worker, sweeper and cancel,
// with JOBS_EVENT_BUS). TestEachRoleBuildsOnlyItsClients counts them.
// Each is the SDK's client of its service; a bootstrap that imports an SDK
// client's package runs its schemas' initialisation at every start, used
// or not (docs/evidence/BENCHMARKS.md, section 4, measures what that costs).

// clients holds the AWS clients of one function, each built once.
type clients struct {
	mu    sync.Mutex
	built []string // the services whose client was built, in order

	sqs       lazy[*sqs.Client]
	secrets   lazy[*secretsmanager.Client]
	scheduler lazy[*scheduler.Client]
	events    lazy[*eventbridge.Client]
}

// initClients sets how each lazy client is built.
func (d *Deps) initClients() {
	d.clients.sqs.build = func() *sqs.Client {
		d.clients.count("SQS")
		return sqs.NewFromConfig(d.aws, func(o *sqs.Options) { instrument(d.tracing, &o.TracerProvider) })
	}
	d.clients.secrets.build = func() *secretsmanager.Client {
		d.clients.count("Secrets Manager")
		return secretsmanager.NewFromConfig(d.aws, func(o *secretsmanager.Options) { instrument(d.tracing, &o.TracerProvider) })
	}
	d.clients.events.build = func() *eventbridge.Client {
		d.clients.count("EventBridge")
		return eventbridge.NewFromConfig(d.aws, func(o *eventbridge.Options) { instrument(d.tracing, &o.TracerProvider) })
	}
	d.clients.scheduler.build = func() *scheduler.Client {
		d.clients.count("Scheduler")
		return scheduler.NewFromConfig(d.aws, func(o *scheduler.Options) { instrument(d.tracing, &o.TracerProvider) })
	}
}

// dynamo builds the DynamoDB client, which every function uses.
func (d *Deps) dynamo() *dynamodb.Client {
	d.clients.count("DynamoDB")
	return dynamodb.NewFromConfig(d.aws, func(o *dynamodb.Options) {
		// DynamoDB Local (an endpoint override) sends no response
		// checksums.
		o.DisableValidateResponseChecksum = o.BaseEndpoint != nil
		if d.aws.Retryer == nil { // a program's own (NewServiceWithConfig) stands
			o.Retryer = dynamoRetryer(d.aws.RetryMaxAttempts)
		}
		instrument(d.tracing, &o.TracerProvider)
	})
}

// The DynamoDB calls' retries fit the deadlines they run under
// (jobs.Deadlines: a final write has 2 s, a claim or a check 2 s). The
// DynamoDB client's default retryer (4 tries, 25 ms base delay) sleeps up
// to a second before retrying a throttle and up to two before the next:
// one throttled final write spent its budget asleep, and a job whose
// handler succeeded was left running until the sweeper recorded it
// interrupted (internal/dev/reliability TestBatchUnderThrottlesAndLostAnswers
// at full size: one to three jobs in 1,000 with 5% of requests
// throttled). Here a retry waits at most dynamoMaxBackoff (jittered,
// doubling from 25 ms), over dynamoMaxAttempts tries, or
// AWS_MAX_ATTEMPTS's; the caller's deadline ends them in any case (a
// service's Retry-After header can stretch one wait). The
// standard retryer's quota of retries stays, so a throttled table is not
// retried ever harder. AWS_RETRY_MODE does not apply to DynamoDB: adaptive
// mode's client-side rate limiter would sleep too. A configuration given
// to NewServiceWithConfig with a Retryer of its own keeps it.
const (
	dynamoMaxAttempts = 6
	dynamoMaxBackoff  = 200 * time.Millisecond
)

func dynamoRetryer(maxAttempts int) aws.Retryer {
	if maxAttempts <= 0 {
		maxAttempts = dynamoMaxAttempts
	}
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = maxAttempts
		o.MaxBackoff = dynamoMaxBackoff
		o.BaseDelay = 25 * time.Millisecond // the DynamoDB client's own
	})
}

func (c *clients) count(service string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.built = append(c.built, service)
}

// builtClients returns the services whose client was built.
func (d *Deps) builtClients() []string {
	d.clients.mu.Lock()
	defer d.clients.mu.Unlock()
	return append([]string(nil), d.clients.built...)
}

// lazy is a value built at its first use.
type lazy[T any] struct {
	once  sync.Once
	build func() T
	v     T
}

func (l *lazy[T]) get() T {
	l.once.Do(func() { l.v = l.build() })
	return l.v
}

// lazySQS is the SQS client, built at its first call (sqsqueue.API and
// sqsqueue.DeadLetterAPI).
type lazySQS struct{ c *lazy[*sqs.Client] }

func (l lazySQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return l.c.get().SendMessage(ctx, in, opts...)
}

func (l lazySQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	return l.c.get().SendMessageBatch(ctx, in, opts...)
}

func (l lazySQS) GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return l.c.get().GetQueueAttributes(ctx, in, opts...)
}

func (l lazySQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return l.c.get().ReceiveMessage(ctx, in, opts...)
}

func (l lazySQS) DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	return l.c.get().DeleteMessage(ctx, in, opts...)
}

func (l lazySQS) ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	return l.c.get().ChangeMessageVisibility(ctx, in, opts...)
}

// lazyScheduler is the Scheduler client, built at its first call
// (schedulerapi.API).
type lazyScheduler struct{ c *lazy[*scheduler.Client] }

func (l lazyScheduler) CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	return l.c.get().CreateSchedule(ctx, in, opts...)
}

func (l lazyScheduler) GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error) {
	return l.c.get().GetSchedule(ctx, in, opts...)
}

func (l lazyScheduler) UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	return l.c.get().UpdateSchedule(ctx, in, opts...)
}

func (l lazyScheduler) DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	return l.c.get().DeleteSchedule(ctx, in, opts...)
}

// lazyEventBridge is the EventBridge client, built at its first call
// (eventbus.API).
type lazyEventBridge struct{ c *lazy[*eventbridge.Client] }

func (l lazyEventBridge) PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	return l.c.get().PutEvents(ctx, in, opts...)
}

// secretString reads the string value of the secret id (an ARN or a name)
// with Secrets Manager's GetSecretValue.
func secretString(ctx context.Context, c *secretsmanager.Client, id string) (string, error) {
	out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(id)})
	if err != nil {
		return "", err
	}
	if out.SecretString == nil {
		return "", errors.New("the secret holds no string (its value is binary)")
	}
	return *out.SecretString, nil
}
