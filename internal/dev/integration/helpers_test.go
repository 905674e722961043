package integration_test

import (
	"context"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

type eventsSQSEvent = events.SQSEvent

// captureSource records a received batch and reports every message as a
// failure, so the event source deletes nothing and the test can hand the
// batch to a worker itself.
type captureSource struct{ ev events.SQSEvent }

func (c *captureSource) invoke(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	c.ev = ev
	var resp events.SQSEventResponse
	for _, r := range ev.Records {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
	}
	return resp, nil
}

func sourceFor(client *sqs.Client, url string, c *captureSource) *localstack.EventSource {
	return &localstack.EventSource{SQS: client, QueueURL: url, Invoke: c.invoke, BatchSize: 10}
}

// jobsStore reads through DynamoDB Local directly, not through any proxy.
func jobsStore(s *stack) driver.Store {
	return dynamostore.New(s.ddb, s.table, dynamostore.Config{})
}

func itoa(n int) string { return strconv.Itoa(n) }
