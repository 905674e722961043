// Package testenv gives tests real DynamoDB Local and fauxqs instances, a
// local stack of their own (StartStack), and a buffer that goroutines may
// write logs to while a test reads them (SyncBuffer). Only tests import it.
//
// Each test binary starts one of each on first use (on free ports, so tests
// pass while `make run` holds the default ports) and stops them in Main.
// JOBS_TEST_DYNAMODB_ENDPOINT and JOBS_TEST_SQS_ENDPOINT point the tests at
// emulators that are already running instead. A test that cannot get an
// emulator fails; it never skips.
package testenv

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"go.uber.org/goleak"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

var (
	mu      sync.Mutex
	dynamo  *localaws.Process
	dynErr  error
	dynURL  string
	sqsProc *localaws.Process
	sqsErr  error
	sqsURL  string
	counter atomic.Int64
)

// Main runs the tests, stops the emulators it started, and then fails the
// run if a goroutine the tests started is still running (goleak). The
// emulators are stopped first, so the SDK clients' idle connections to
// them close instead of being ignored.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	if dynamo != nil {
		dynamo.Stop()
	}
	if sqsProc != nil {
		sqsProc.Stop()
	}
	mu.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// DynamoDBEndpoint returns the endpoint of a running DynamoDB Local,
// starting one if needed.
func DynamoDBEndpoint(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if dynURL == "" && dynErr == nil {
		if ep := os.Getenv("JOBS_TEST_DYNAMODB_ENDPOINT"); ep != "" {
			dynURL = ep
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dynamo, dynErr = localaws.StartDynamoDB(ctx, localaws.Options{})
			if dynErr == nil {
				dynURL = dynamo.Endpoint
			}
		}
	}
	if dynErr != nil {
		t.Fatalf("DynamoDB Local is required and could not be started: %v", dynErr)
	}
	return dynURL
}

// SQSEndpoint returns the endpoint of a running fauxqs, starting one if
// needed.
func SQSEndpoint(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if sqsURL == "" && sqsErr == nil {
		if ep := os.Getenv("JOBS_TEST_SQS_ENDPOINT"); ep != "" {
			sqsURL = ep
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sqsProc, sqsErr = localaws.StartSQS(ctx, localaws.Options{})
			if sqsErr == nil {
				sqsURL = sqsProc.Endpoint
			}
		}
	}
	if sqsErr != nil {
		t.Fatalf("the fauxqs SQS emulator is required and could not be started: %v", sqsErr)
	}
	return sqsURL
}

// DynamoDB returns a client for the test DynamoDB Local.
func DynamoDB(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	return localaws.DynamoDBClient(DynamoDBEndpoint(t), optFns...)
}

// SQS returns a client for the test fauxqs.
func SQS(t testing.TB, optFns ...func(*sqs.Options)) *sqs.Client {
	t.Helper()
	return localaws.SQSClient(SQSEndpoint(t), optFns...)
}

// S3 returns a client for the test fauxqs's S3.
func S3(t testing.TB) *s3.Client {
	t.Helper()
	return localaws.S3Client(SQSEndpoint(t))
}

// NewBucket creates a fresh bucket and returns its name (fauxqs keeps it
// until it stops).
func NewBucket(t testing.TB, client *s3.Client) string {
	t.Helper()
	name := strings.ToLower(UniqueName(t, "parts"))
	if len(name) > 63 {
		name = name[len(name)-63:]
	}
	name = strings.Trim(name, "-")
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return name
}

// UniqueName returns a name no other test in this run uses.
func UniqueName(t testing.TB, prefix string) string {
	name := unsafeChars.ReplaceAllString(t.Name(), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s-%s-%d-%d", prefix, name, os.Getpid(), counter.Add(1))
}

// NewTable creates a fresh jobs table (from dynamostore's definition) and
// returns its name. It is deleted when the test ends.
func NewTable(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	name := UniqueName(t, "jobs")
	ctx := context.Background()
	if _, err := client.CreateTable(ctx, dynamostore.CreateTableInput(name)); err != nil {
		t.Fatalf("create table: %v", err)
	}
	if _, err := client.UpdateTimeToLive(ctx, dynamostore.TimeToLiveInput(name)); err != nil {
		t.Fatalf("enable TTL: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	})
	return name
}

// NewQueues creates a fresh queue pair from spec and returns its URLs.
func NewQueues(t testing.TB, client *sqs.Client, spec sqsqueue.Spec) sqsqueue.URLs {
	t.Helper()
	urls, err := sqsqueue.Create(context.Background(), client, UniqueName(t, "jobs"), spec)
	if err != nil {
		t.Fatalf("create queues: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &urls.Queue})
		_, _ = client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &urls.DLQ})
	})
	return urls
}
