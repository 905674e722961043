package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// Routes turn messages that other AWS services drop on the queue into jobs.
//
// The worker tries, in this order:
//
//  1. a job reference {"job_id": ...} (what enqueue and the sweeper send);
//  2. an SNS notification: the envelope is unwrapped and its Message is
//     matched by the rules below; if nothing matches it, an SNSRoute for
//     its topic takes the whole notification;
//  3. an S3 event notification: one job per record, to the first S3Route
//     matching the record's bucket and event name; s3:TestEvent is
//     acknowledged and logged;
//  4. an EventBridge event: the first EventBridgeRoute matching its source
//     and detail-type;
//  5. a plain envelope {"kind": ..., "payload": ..., "idempotency_key": ...}
//     if an EnvelopeRoute allows the kind.
//
// A message nothing accepts is listed as a batch item failure, so it
// reaches the dead-letter queue after maxReceiveCount, with a log line that
// names its shape (length, top-level keys), never its body. SNS raw message
// delivery needs nothing special: the raw message is matched directly.
//
// Each job's id is derived from the message (S3 bucket, key, event name and
// sequencer; EventBridge event id; SNS message id; the SQS message id or the
// envelope's idempotency key), so a message delivered twice creates one job
// and runs it once. A message that matches a route but whose payload does
// not decode into the kind's payload type becomes a failed job with the
// reserved code invalid_payload, readable by the route's owner.

// S3Route sends S3 event notification records to Kind, whose payload type
// must be events.S3EventRecord.
type S3Route struct {
	// Bucket limits the route to one bucket ("" for any).
	Bucket string
	// EventPrefix limits the route to event names with this prefix, such
	// as "ObjectCreated:" ("" for any).
	EventPrefix string
	Kind        string
	// Owner owns the jobs (and is the only caller who can read them).
	Owner string
}

// EventBridgeRoute sends EventBridge events with the given source and
// detail-type to Kind, whose payload type must be events.EventBridgeEvent.
type EventBridgeRoute struct {
	Source     string
	DetailType string // "" for any
	Kind       string
	Owner      string
}

// SNSRoute sends notifications from TopicARN (whose message no other route
// takes) to Kind, whose payload type must be events.SNSEntity.
type SNSRoute struct {
	TopicARN string
	Kind     string
	Owner    string
}

// EnvelopeRoute accepts plain envelopes {"kind": ..., "payload": ...} for
// the listed kinds, owned by Owner. Any producer allowed to SendMessage can
// use it, so list only the kinds such producers may enqueue.
type EnvelopeRoute struct {
	Kinds []string
	Owner string
}

// Routes are the worker's routes for foreign messages.
type Routes struct {
	S3          []S3Route
	EventBridge []EventBridgeRoute
	SNS         []SNSRoute
	Envelope    []EnvelopeRoute
	// RelayTopics are the SNS topics (ARNs) allowed to relay S3
	// notifications, EventBridge events and envelopes wrapped in an SNS
	// notification. A wrapped message from any other topic is not
	// unwrapped: anyone who can publish to some topic subscribed to the
	// queue could otherwise pass for S3 or EventBridge. (SNSRoute matches
	// notifications of its own topic as SNS entities either way.)
	RelayTopics []string
}

// routedJob is a job to create from a foreign message.
type routedJob struct {
	ID      string
	Kind    string
	Owner   string
	Payload []byte
	Source  string // "s3", "eventbridge", "sns", "envelope": for logs
}

// routeResult is what the routes made of a message.
type routeResult struct {
	jobs  []routedJob
	ack   string // non-empty: acknowledge without a job, and log this
	shape string // non-empty: no route accepted it
}

var (
	s3RecordType  = reflect.TypeFor[events.S3EventRecord]()
	ebEventType   = reflect.TypeFor[events.EventBridgeEvent]()
	snsEntityType = reflect.TypeFor[events.SNSEntity]()
)

// check verifies the routes against the registry: every kind registered,
// with the payload type its route delivers.
func (r *Routes) check(reg *Registry) error {
	if r == nil {
		return nil
	}
	var errs []error
	want := func(kind, owner string, t reflect.Type, what string) {
		k, ok := reg.kinds[kind]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s route: kind %q is not registered", what, kind))
		case t != nil && k.payloadType != t:
			errs = append(errs, fmt.Errorf("%s route: kind %q takes %v, want %v", what, kind, k.payloadType, t))
		}
		if checkOwner(owner) != nil {
			errs = append(errs, fmt.Errorf("%s route to %q: invalid owner %q", what, kind, owner))
		}
	}
	for _, s := range r.S3 {
		want(s.Kind, s.Owner, s3RecordType, "S3")
	}
	for _, e := range r.EventBridge {
		if e.Source == "" {
			errs = append(errs, fmt.Errorf("EventBridge route to %q: source is required", e.Kind))
		}
		want(e.Kind, e.Owner, ebEventType, "EventBridge")
	}
	for _, s := range r.SNS {
		want(s.Kind, s.Owner, snsEntityType, "SNS")
	}
	for _, e := range r.Envelope {
		for _, k := range e.Kinds {
			want(k, e.Owner, nil, "envelope")
		}
	}
	return errors.Join(errs...)
}

// route matches a message body that is not a job reference.
func (r *Routes) route(body, messageID string) routeResult {
	if r == nil {
		r = &Routes{}
	}
	raw := []byte(body)
	if checkJSON(raw, 1<<20) != nil {
		return routeResult{shape: wire.DescribeShape(body)}
	}
	if res, ok := r.routeSNS(raw); ok {
		return res
	}
	if res, ok := r.match(raw, messageID); ok {
		return res
	}
	return routeResult{shape: wire.DescribeShape(body)}
}

// match tries the S3, EventBridge and envelope rules.
func (r *Routes) match(raw []byte, messageID string) (routeResult, bool) {
	var probe struct {
		Records    []json.RawMessage `json:"Records"`
		Event      string            `json:"Event"`
		Service    string            `json:"Service"`
		ID         string            `json:"id"`
		Source     string            `json:"source"`
		DetailType *string           `json:"detail-type"`
		Detail     json.RawMessage   `json:"detail"`
		Kind       *string           `json:"kind"`
		Payload    json.RawMessage   `json:"payload"`
	}
	if json.Unmarshal(raw, &probe) != nil {
		return routeResult{}, false
	}
	switch {
	case probe.Event == "s3:TestEvent" && probe.Service == "Amazon S3":
		return routeResult{ack: "s3:TestEvent"}, true
	case len(probe.Records) > 0:
		return r.routeS3(raw)
	case probe.Source != "" && probe.DetailType != nil && probe.ID != "" && probe.Detail != nil:
		return r.routeEventBridge(raw)
	case probe.Kind != nil:
		return r.routeEnvelope(raw, messageID)
	}
	return routeResult{}, false
}

func (r *Routes) routeS3(raw []byte) (routeResult, bool) {
	var ev events.S3Event
	if json.Unmarshal(raw, &ev) != nil {
		return routeResult{}, false
	}
	var res routeResult
	for _, rec := range ev.Records {
		if rec.EventSource != "aws:s3" {
			return routeResult{}, false
		}
		var route *S3Route
		for i := range r.S3 {
			s := &r.S3[i]
			if (s.Bucket == "" || s.Bucket == rec.S3.Bucket.Name) && strings.HasPrefix(rec.EventName, s.EventPrefix) {
				route = s
				break
			}
		}
		if route == nil {
			return routeResult{}, false // one unroutable record: the whole message goes to the DLQ
		}
		payload, err := json.Marshal(rec)
		if err != nil {
			return routeResult{}, false
		}
		o := rec.S3.Object
		res.jobs = append(res.jobs, routedJob{
			ID:   wire.DerivedID("s3", rec.S3.Bucket.Name, o.Key, o.VersionID, rec.EventName, o.Sequencer),
			Kind: route.Kind, Owner: route.Owner, Payload: payload, Source: "s3",
		})
	}
	return res, true
}

func (r *Routes) routeEventBridge(raw []byte) (routeResult, bool) {
	var ev events.EventBridgeEvent
	if json.Unmarshal(raw, &ev) != nil {
		return routeResult{}, false
	}
	for _, e := range r.EventBridge {
		if e.Source == ev.Source && (e.DetailType == "" || e.DetailType == ev.DetailType) {
			payload, err := json.Marshal(ev)
			if err != nil {
				return routeResult{}, false
			}
			return routeResult{jobs: []routedJob{{
				ID: wire.DerivedID("eventbridge", ev.Source, ev.ID), Kind: e.Kind, Owner: e.Owner, Payload: payload, Source: "eventbridge",
			}}}, true
		}
	}
	return routeResult{}, false
}

func (r *Routes) routeEnvelope(raw []byte, messageID string) (routeResult, bool) {
	var env struct {
		Kind           string          `json:"kind"`
		Payload        json.RawMessage `json:"payload"`
		IdempotencyKey string          `json:"idempotency_key"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if dec.Decode(&env) != nil {
		return routeResult{}, false
	}
	for _, e := range r.Envelope {
		for _, k := range e.Kinds {
			if k != env.Kind {
				continue
			}
			id := wire.DerivedID("sqs", messageID)
			if env.IdempotencyKey != "" {
				if checkIdempotencyKey(env.IdempotencyKey) != nil {
					return routeResult{}, false
				}
				// Its own namespace: a sender on the queue cannot take the id
				// of an HTTP enqueue with the owner's idempotency key.
				id = wire.DerivedID("envelope-idempotency", e.Owner, env.IdempotencyKey)
			}
			payload := []byte(env.Payload)
			if len(payload) == 0 {
				payload = []byte("null")
			}
			return routeResult{jobs: []routedJob{{ID: id, Kind: k, Owner: e.Owner, Payload: payload, Source: "envelope"}}}, true
		}
	}
	return routeResult{}, false
}

// snsNotification is an SNS message as SNS delivers it to SQS (not raw).
type snsNotification struct {
	Type      string `json:"Type"`
	MessageID string `json:"MessageId"`
	TopicArn  string `json:"TopicArn"`
	Message   string `json:"Message"`
}

func (r *Routes) routeSNS(raw []byte) (routeResult, bool) {
	var n snsNotification
	if json.Unmarshal(raw, &n) != nil || n.Type != "Notification" || n.MessageID == "" || n.TopicArn == "" {
		return routeResult{}, false
	}
	// The inner message first: an S3 or EventBridge event or an envelope
	// relayed through an allowed SNS topic. Its id comes from the SNS
	// message id when the inner shape has none of its own.
	if slices.Contains(r.RelayTopics, n.TopicArn) && checkJSON([]byte(n.Message), 1<<20) == nil {
		if res, ok := r.match([]byte(n.Message), "sns:"+n.MessageID); ok {
			return res, true
		}
	}
	for _, s := range r.SNS {
		if s.TopicARN == n.TopicArn {
			var entity events.SNSEntity
			if json.Unmarshal(raw, &entity) != nil {
				return routeResult{}, false
			}
			payload, err := json.Marshal(entity)
			if err != nil {
				return routeResult{}, false
			}
			return routeResult{jobs: []routedJob{{
				ID: wire.DerivedID("sns", n.TopicArn, n.MessageID), Kind: s.Kind, Owner: s.Owner, Payload: payload, Source: "sns",
			}}}, true
		}
	}
	return routeResult{}, false
}

func init() { wire.DerivedJobIDs = derivedJobIDs }

// derivedJobIDs returns the ids of the jobs a foreign message becomes if
// a route accepts it. The ids depend only on the message, and for a plain
// envelope on the SQS message id (or, with an idempotency key, on the
// route's owner, envelopeOwner). Producers use it to find the jobs their
// message made. It returns no ids for a shape no route could take, and
// acknowledged true for a message the worker acknowledges without a job
// (s3:TestEvent).
func derivedJobIDs(body, messageID, envelopeOwner string) (ids []string, acknowledged bool) {
	var probe struct {
		Source   string `json:"source"`
		TopicArn string `json:"TopicArn"`
		Kind     string `json:"kind"`
		Message  string `json:"Message"`
	}
	_ = json.Unmarshal([]byte(body), &probe)
	all := &Routes{
		S3:          []S3Route{{Kind: "*", Owner: envelopeOwner}},
		EventBridge: []EventBridgeRoute{{Source: probe.Source, Kind: "*"}},
		SNS:         []SNSRoute{{TopicARN: probe.TopicArn, Kind: "*"}},
		Envelope:    []EnvelopeRoute{{Kinds: []string{probe.Kind}, Owner: envelopeOwner}},
		RelayTopics: []string{probe.TopicArn},
	}
	if probe.Message != "" {
		var inner struct {
			Source string `json:"source"`
			Kind   string `json:"kind"`
		}
		if json.Unmarshal([]byte(probe.Message), &inner) == nil {
			all.EventBridge = append(all.EventBridge, EventBridgeRoute{Source: inner.Source, Kind: "*"})
			all.Envelope = append(all.Envelope, EnvelopeRoute{Kinds: []string{inner.Kind}, Owner: envelopeOwner})
		}
	}
	res := all.route(body, messageID)
	for _, j := range res.jobs {
		ids = append(ids, j.ID)
	}
	return ids, res.ack != ""
}

// Source is a sender of foreign messages that the infrastructure connects
// to the queue: S3 notifications of a bucket (Type "s3", Bucket), or
// EventBridge events of a source (Type "eventbridge", EventSource, and
// DetailType, "" for every detail type). The CDK construct tells the worker
// its sources (JOBS_SOURCES), and the worker refuses to start when a source
// has no route that accepts its messages: they would all go to the
// dead-letter queue.
type Source struct {
	Type        string `json:"type"`
	Bucket      string `json:"bucket,omitempty"`
	EventSource string `json:"source,omitempty"`
	DetailType  string `json:"detail_type,omitempty"`
}

func (s Source) String() string {
	switch s.Type {
	case "s3":
		return "S3 bucket " + s.Bucket
	case "eventbridge":
		if s.DetailType == "" {
			return "EventBridge source " + s.EventSource + " (every detail type)"
		}
		return "EventBridge source " + s.EventSource + " (detail type " + s.DetailType + ")"
	}
	return "source of type " + s.Type
}

// errUnroutedSource  a configured source has no route that accepts its
// messages.
var errUnroutedSource = errors.New("jobs: a configured source has no route")

// CheckSources returns an error naming each source that no route accepts
// (errUnroutedSource), with the routes there are.
func (r *Routes) CheckSources(sources []Source) error {
	var errs []error
	for _, src := range sources {
		if !r.accepts(src) {
			errs = append(errs, fmt.Errorf("%w: %v is connected to the queue but no route accepts it (routes: %s)", errUnroutedSource, src, r.describe()))
		}
	}
	return errors.Join(errs...)
}

func (r *Routes) accepts(src Source) bool {
	if r == nil {
		return false
	}
	switch src.Type {
	case "s3":
		for _, rt := range r.S3 {
			if (rt.Bucket == "" || rt.Bucket == src.Bucket) && (rt.EventPrefix == "" || strings.HasPrefix("ObjectCreated:", rt.EventPrefix) || strings.HasPrefix(rt.EventPrefix, "ObjectCreated:")) {
				return true
			}
		}
	case "eventbridge":
		for _, rt := range r.EventBridge {
			if rt.Source == src.EventSource && (rt.DetailType == "" || rt.DetailType == src.DetailType) {
				return true
			}
		}
	}
	return false
}

func (r *Routes) describe() string {
	if r == nil {
		return "none"
	}
	var parts []string
	for _, rt := range r.S3 {
		parts = append(parts, fmt.Sprintf("s3 bucket %q events %q -> %s", rt.Bucket, rt.EventPrefix, rt.Kind))
	}
	for _, rt := range r.EventBridge {
		parts = append(parts, fmt.Sprintf("eventbridge %q/%q -> %s", rt.Source, rt.DetailType, rt.Kind))
	}
	if len(parts) == 0 {
		return "none for S3 or EventBridge"
	}
	return strings.Join(parts, "; ")
}
