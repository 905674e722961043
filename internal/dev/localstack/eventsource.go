// Package localstack runs the system on one machine the way AWS runs it:
// an event source that does what Lambda's SQS event source mapping does, a
// gateway that turns HTTP requests into API Gateway v2 events, and a timer
// for the sweeper.
package localstack

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSHandler is what the event source invokes with each batch: the worker
// function, directly or through the Runtime Interface Emulator.
type SQSHandler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// SQSAPI is the part of the SQS client the event source uses.
type SQSAPI interface {
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// EventSource polls a queue and invokes a handler with batches, like
// Lambda's SQS event source mapping with ReportBatchItemFailures: it deletes
// the messages the handler did not list as failures and leaves the rest to
// the visibility timeout (and, after maxReceiveCount, the dead-letter queue).
type EventSource struct {
	SQS      SQSAPI
	QueueURL string
	QueueARN string
	Invoke   SQSHandler
	// BatchSize is the most messages per invocation (1..10; default 10).
	BatchSize int
	// Window is how long to keep gathering a batch before invoking
	// (default 0: invoke with what one receive returns).
	Window time.Duration
	// Concurrency is how many pollers (and invocations) run at once
	// (default 1). Each poller invokes one batch at a time.
	Concurrency int
	// Timeout bounds one invocation, like the function's timeout.
	Timeout time.Duration
	Logger  *slog.Logger
	// Gate, when set, pauses polling while it is closed (Stack.Pause).
	Gate *Gate
}

// Gate pauses event sources, as disabling an event source mapping does:
// while it is closed no poll starts, and Close returns once the polls in
// flight (and their invocations) are done. The zero value is open.
type Gate struct {
	mu     sync.RWMutex
	closed bool
}

// Close pauses polling and waits for the polls in flight.
func (g *Gate) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Open resumes polling.
func (g *Gate) Open() {
	g.mu.Lock()
	g.closed = false
	g.mu.Unlock()
}

// enter reports whether a poll may start; if so, leave must follow it.
func (g *Gate) enter() bool {
	if g == nil {
		return true
	}
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return false
	}
	return true
}

func (g *Gate) leave() {
	if g != nil {
		g.mu.RUnlock()
	}
}

// Run polls until ctx ends.
func (e *EventSource) Run(ctx context.Context) {
	n := max(e.Concurrency, 1)
	done := make(chan struct{}, n)
	for range n {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				if !e.Gate.enter() {
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
					continue
				}
				err := e.PollOnce(ctx)
				e.Gate.leave()
				if err != nil && ctx.Err() == nil {
					e.logger().Warn("event source: poll failed", slog.String("error", err.Error()))
					select {
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
			}
		}()
	}
	for range n {
		<-done
	}
}

func (e *EventSource) logger() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// receiveTimeout bounds one receive of PollOnce: its second of long
// polling, and time to spare.
var receiveTimeout = 10 * time.Second

// PollOnce receives one batch (long-polling up to a second), invokes the
// handler with it, and deletes what succeeded. It returns after an empty
// receive too.
func (e *EventSource) PollOnce(ctx context.Context) error {
	size := e.BatchSize
	if size < 1 || size > 10 {
		size = 10
	}
	var msgs []types.Message
	deadline := time.Now().Add(e.Window)
	for len(msgs) < size {
		// A receive long-polls a second; one the emulator leaves
		// unanswered is given up after receiveTimeout, as an empty one,
		// so the poller goes on (Lambda's poller does not hang either).
		rctx, cancel := context.WithTimeout(ctx, receiveTimeout)
		out, err := e.SQS.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(e.QueueURL),
			MaxNumberOfMessages:         int32(size - len(msgs)),
			WaitTimeSeconds:             1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			e.logger().Warn("event source: a receive went unanswered; polling again", slog.Duration("after", receiveTimeout))
			break
		}
		if err != nil {
			if len(msgs) == 0 {
				return err
			}
			break
		}
		msgs = append(msgs, out.Messages...)
		if len(out.Messages) == 0 || !time.Now().Before(deadline) {
			break
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	ev := e.event(msgs)
	ictx := ctx
	if e.Timeout > 0 {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ctx, e.Timeout)
		defer cancel()
	}
	resp, err := e.Invoke(ictx, ev)
	if err != nil {
		// A failed invocation: every message comes back after its
		// visibility timeout, as with Lambda.
		e.logger().Warn("event source: invocation failed; the batch will come back", slog.Int("messages", len(msgs)), slog.String("error", err.Error()))
		return nil
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var entries []types.DeleteMessageBatchRequestEntry
	for i, m := range msgs {
		if !failed[aws.ToString(m.MessageId)] {
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(entries) == 0 {
		return nil
	}
	out, err := e.SQS.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(e.QueueURL), Entries: entries})
	if err != nil {
		return err
	}
	if len(out.Failed) > 0 {
		return errors.New("event source: some deletes failed")
	}
	return nil
}

func (e *EventSource) event(msgs []types.Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		attrs := map[string]string{}
		for k, v := range m.Attributes {
			attrs[k] = v
		}
		mattrs := map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			mattrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
		}
		ev.Records[i] = events.SQSMessage{
			MessageId:         aws.ToString(m.MessageId),
			ReceiptHandle:     aws.ToString(m.ReceiptHandle),
			Body:              aws.ToString(m.Body),
			Md5OfBody:         aws.ToString(m.MD5OfBody),
			Attributes:        attrs,
			MessageAttributes: mattrs,
			EventSource:       "aws:sqs",
			EventSourceARN:    e.QueueARN,
			AWSRegion:         "us-east-1",
		}
	}
	return ev
}
