package localstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// LaneRace is what UrgentBehindBulk measured.
type LaneRace struct {
	// BulkQueued is how many bulk jobs were queued before the pollers
	// started.
	BulkQueued int
	// Starts are each urgent job's start (its claim) after its enqueue,
	// and BulkLeft the bulk jobs still queued (visible) at that moment.
	Starts   []time.Duration
	BulkLeft []int
	// Lanes are the lanes the urgent jobs ran in.
	Lanes []string
}

// LaneLoad is the jobs one lane is given: Jobs jobs of Kind with Payload.
type LaneLoad struct {
	Kind    string
	Payload json.RawMessage
	Jobs    int
}

// UrgentBehindBulk measures how soon an urgent job starts behind a bulk
// backlog, on a stack started paused (Config.StartPaused) whose registry
// has a bulk and an urgent lane: it queues the bulk jobs (in batches of
// 1,000, as caller "lanes"), resumes the event sources, waits until the
// bulk lane's worker holds a batch, then enqueues the urgent jobs one
// after another, each once the last one started.
func (s *Stack) UrgentBehindBulk(ctx context.Context, bulk, urgent LaneLoad) (LaneRace, error) {
	var r LaneRace
	bulkQ, ok := s.Lanes["bulk"]
	if !ok || s.Lanes["urgent"].Queue == "" {
		return r, fmt.Errorf("localstack: lanes %v: want bulk and urgent", s.Lanes)
	}
	api, err := s.apiClient("lanes")
	if err != nil {
		return r, err
	}
	for i := 0; i < bulk.Jobs; i += 1000 {
		var specs []jobs.JobSpec
		for range min(1000, bulk.Jobs-i) {
			specs = append(specs, jobs.JobSpec{Kind: bulk.Kind, Payload: bulk.Payload})
		}
		body, _ := json.Marshal(map[string]any{"jobs": specs})
		if _, err := post(ctx, api, deploy.RouteEnqueueBatch, body, "lanes-bulk-"+strconv.Itoa(i)); err != nil {
			return r, err
		}
	}
	sqsc := localaws.SQSClient(s.SQSEndpoint)
	if r.BulkQueued, err = queueDepth(ctx, sqsc, bulkQ.Queue, sqstypes.QueueAttributeNameApproximateNumberOfMessages); err != nil {
		return r, err
	}
	s.Resume()
	for busy := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n, err := queueDepth(ctx, sqsc, bulkQ.Queue, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)
		if err != nil {
			return r, err
		}
		if n > 0 {
			break
		}
		if time.Now().After(busy) {
			return r, fmt.Errorf("localstack: the bulk lane's worker never took a batch")
		}
	}
	store := dynamostore.New(localaws.DynamoDBClient(s.DynamoDBEndpoint), s.Table, dynamostore.Config{})
	for i := range urgent.Jobs {
		body, _ := json.Marshal(jobs.JobSpec{Kind: urgent.Kind, Payload: urgent.Payload})
		enqueued := time.Now()
		out, err := post(ctx, api, deploy.RouteEnqueue, body, "lanes-urgent-"+strconv.Itoa(i))
		if err != nil {
			return r, err
		}
		var v jobs.View
		if err := json.Unmarshal(out, &v); err != nil {
			return r, err
		}
		for deadline := enqueued.Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			rec, err := store.Get(ctx, v.ID)
			if err == nil && !rec.StartedAt.IsZero() {
				left, err := queueDepth(ctx, sqsc, bulkQ.Queue, sqstypes.QueueAttributeNameApproximateNumberOfMessages)
				if err != nil {
					return r, err
				}
				r.Starts, r.BulkLeft, r.Lanes = append(r.Starts, rec.StartedAt.Sub(enqueued)), append(r.BulkLeft, left), append(r.Lanes, rec.Lane)
				break
			}
			if time.Now().After(deadline) {
				return r, fmt.Errorf("localstack: urgent job %s did not start within 30 s", v.ID)
			}
		}
	}
	return r, nil
}

// apiClient is the API client of the stack's API as caller: a request
// that is safe to repeat (every one post sends carries an idempotency
// key) is sent up to 5 times while it fails or answers a 5xx.
func (s *Stack) apiClient(caller string) (*apiclient.Client, error) {
	base, err := url.Parse(s.APIURL)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	return &apiclient.Client{Base: base, Do: hc.Do, Caller: caller, Attempts: 5}, nil
}

// post sends body to the route with an idempotency key and returns the
// answer.
func post(ctx context.Context, api *apiclient.Client, route string, body []byte, key string) ([]byte, error) {
	resp, err := api.Call(ctx, apiclient.Request{Route: route, Body: body, Header: map[string]string{"Idempotency-Key": key}}, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", route, err)
	}
	return resp.Body, nil
}

func queueDepth(ctx context.Context, c *sqs.Client, url string, attr sqstypes.QueueAttributeName) (int, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{attr}})
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(out.Attributes[string(attr)])
}
