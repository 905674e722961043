package examplekinds

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Kinds fed by other AWS services (see Routes).
const (
	// S3Object runs for each S3 object-created notification.
	S3Object = "example.s3_object"
	// Event runs for EventBridge events from EventSource.
	Event = "example.event"
)

// EventSource is the EventBridge source routed to example.event.
const EventSource = "lambdajobs.example"

// DefaultRouteOwner owns routed jobs when JOBS_EXAMPLE_ROUTE_OWNER is not
// set: the local stack's default caller, so `curl` without X-Local-Caller
// can read them.
const DefaultRouteOwner = "arn:aws:iam::000000000000:user/local"

// S3ObjectResult is example.s3_object's result.
type S3ObjectResult struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	Event  string `json:"event"`
}

// PublicJSON returns the whole result.
func (r S3ObjectResult) PublicJSON() ([]byte, error) { return json.Marshal(r) }

// DescribeObject runs example.s3_object: it reports the object the
// notification names.
func DescribeObject(_ context.Context, job *jobs.Job[events.S3EventRecord]) (S3ObjectResult, error) {
	r := job.Payload
	return S3ObjectResult{Bucket: r.S3.Bucket.Name, Key: r.S3.Object.URLDecodedKey, Size: r.S3.Object.Size, Event: r.EventName}, nil
}

// EventResult is example.event's result.
type EventResult struct {
	Source      string `json:"source"`
	DetailType  string `json:"detail_type"`
	DetailBytes int    `json:"detail_bytes"`
}

// PublicJSON returns the whole result.
func (r EventResult) PublicJSON() ([]byte, error) { return json.Marshal(r) }

// DescribeEvent runs example.event: it reports the event's source, type
// and detail size (the detail itself may be private).
func DescribeEvent(_ context.Context, job *jobs.Job[events.EventBridgeEvent]) (EventResult, error) {
	e := job.Payload
	return EventResult{Source: e.Source, DetailType: e.DetailType, DetailBytes: len(e.Detail)}, nil
}

// Routes returns the example routes: S3 object-created notifications from
// any bucket to example.s3_object, EventBridge events from EventSource to
// example.event, and plain envelopes for the example kinds; all owned by
// owner.
func Routes(owner string) *jobs.Routes {
	if strings.TrimSpace(owner) == "" {
		owner = DefaultRouteOwner
	}
	return &jobs.Routes{
		S3:          []jobs.S3Route{{EventPrefix: "ObjectCreated:", Kind: S3Object, Owner: owner}},
		EventBridge: []jobs.EventBridgeRoute{{Source: EventSource, Kind: Event, Owner: owner}},
		Envelope:    []jobs.EnvelopeRoute{{Kinds: []string{Hash, Sleep, Fail, Flaky}, Owner: owner}},
		RelayTopics: []string{RelayTopic},
	}
}

// RelayTopic is the example SNS topic allowed to relay S3, EventBridge and
// envelope messages to the example routes (the fixtures' "orders" topic).
const RelayTopic = "arn:aws:sns:us-east-1:123456789012:orders"
