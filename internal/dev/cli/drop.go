package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/lambdajobs/lambdajobs/internal/wire"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
)

// drop sends body to the queue (-queue, on -sqs-endpoint) as another AWS
// service would, and prints the ids of the jobs the worker will make of it
// (with -owner's envelope route); with -wait it watches them.
func (c *client) drop(ctx context.Context, body []byte) int {
	queue, endpoint, owner := c.opts.queue, c.opts.endpoint, c.opts.owner
	var client *sqs.Client
	queueURL := queue
	if strings.HasPrefix(queue, "https://") {
		cfg, err := config.LoadDefaultConfig(ctx)
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob: load AWS config:", err)
			return 1
		}
		client = sqs.NewFromConfig(cfg)
	} else {
		// A queue name on a local emulator: fixed, fake credentials.
		client = sqs.New(sqs.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
			Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
		})
		out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(queue)})
		if err != nil {
			fmt.Fprintf(c.stderr, "ljob: queue %q on %s: %v\n", queue, endpoint, err)
			return 1
		}
		queueURL = aws.ToString(out.QueueUrl)
	}
	out, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String(string(body))})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob: send:", err)
		return 1
	}
	ids, ack := wire.DerivedJobIDs(string(body), aws.ToString(out.MessageId), owner)
	if c.jsonOut {
		fmt.Fprintf(c.stdout, "{\"message_id\":%q,\"job_ids\":[%s]}\n", aws.ToString(out.MessageId), quoteAll(ids))
	} else {
		fmt.Fprintf(c.stdout, "sent message %s\n", aws.ToString(out.MessageId))
		switch {
		case ack:
			fmt.Fprintln(c.stdout, "the worker acknowledges this message without a job")
		case len(ids) == 0:
			fmt.Fprintln(c.stdout, "no route could make a job of it: expect it in the dead-letter queue")
		}
		for _, id := range ids {
			fmt.Fprintf(c.stdout, "job %s\n", id)
		}
	}
	if !c.opts.wait {
		return 0
	}
	code := 0
	for _, id := range ids {
		// The worker creates the job when it receives the message.
		if rc := c.awaitJob(ctx, id); rc != 0 {
			return rc
		}
		if rc := c.watch(ctx, id); rc > code {
			code = rc
		}
	}
	return code
}

// awaitJob waits up to a minute for a job that a worker is about to create.
func (c *client) awaitJob(ctx context.Context, id string) int {
	deadline := time.Now().Add(time.Minute)
	for {
		status, _, _, err := c.call(ctx, apiclient.Request{Route: deploy.RouteGetJob, Params: map[string]string{"id": id}})
		switch {
		case err != nil:
			fmt.Fprintln(c.stderr, "ljob:", err)
			return 1
		case status != http.StatusNotFound:
			return 0
		case time.Now().After(deadline):
			fmt.Fprintf(c.stderr, "ljob: job %s did not appear within a minute (is the worker running? is the message in the DLQ?)\n", id)
			return 1
		}
		select {
		case <-ctx.Done():
			return 1
		case <-time.After(c.interval):
		}
	}
}

func quoteAll(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(q, ",")
}
