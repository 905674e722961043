// Package eventbus publishes job events to an Amazon EventBridge event bus
// (PutEvents): the driver.Bus of a deployment. docs/EVENTS.md describes
// the events.
package eventbus

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	smithytracing "github.com/aws/smithy-go/tracing"

	"github.com/lambdajobs/lambdajobs/internal/awsjson"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// API is EventBridge's PutEvents, as the bus calls it: a Client, or a
// test's fake.
type API interface {
	PutEvents(ctx context.Context, in *PutEventsInput) (*PutEventsOutput, error)
}

// PutEventsInput is a PutEvents request: the fields of EventBridge's that
// the bus sends.
type PutEventsInput struct {
	Entries []Entry `json:"Entries"`
}

// Entry is one event of a PutEvents request.
type Entry struct {
	Source       string `json:"Source,omitempty"`
	DetailType   string `json:"DetailType,omitempty"`
	Detail       string `json:"Detail,omitempty"`
	EventBusName string `json:"EventBusName,omitempty"`
	// Time is the event's time in seconds since the epoch (the JSON
	// protocol's timestamps); 0 leaves it to EventBridge.
	Time float64 `json:"Time,omitempty"`
}

// PutEventsOutput is PutEvents' answer: one result per entry, in order.
type PutEventsOutput struct {
	FailedEntryCount int      `json:"FailedEntryCount"`
	Entries          []Result `json:"Entries"`
}

// Result is an entry's result: its event id, or the error that refused it.
type Result struct {
	EventID      string `json:"EventId,omitempty"`
	ErrorCode    string `json:"ErrorCode,omitempty"`
	ErrorMessage string `json:"ErrorMessage,omitempty"`
}

// Client is API over Amazon EventBridge. It signs and sends PutEvents
// itself, with the SDK's signer, retryer and error types
// (internal/awsjson): the SDK's EventBridge client would add its schemas'
// initialisation to every cold start of the functions that link it.
type Client struct{ c *awsjson.Client }

// ClientOptions adjusts a Client.
type ClientOptions struct {
	// TracerProvider, when set, opens a span per PutEvents call.
	TracerProvider smithytracing.TracerProvider
}

// NewClient returns a Client with cfg's region, credentials, endpoint
// (AWS_ENDPOINT_URL_EVENTBRIDGE among the configuration's sources, or
// BaseEndpoint), HTTP client and retry settings.
func NewClient(cfg aws.Config, opts ClientOptions) *Client {
	return &Client{awsjson.New(cfg, awsjson.EventBridge, func(o *awsjson.Options) { o.TracerProvider = opts.TracerProvider })}
}

// PutEvents sends one PutEvents request.
func (c *Client) PutEvents(ctx context.Context, in *PutEventsInput) (*PutEventsOutput, error) {
	out := &PutEventsOutput{}
	if err := c.c.Call(ctx, "PutEvents", in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// PutEvents' limits: entries per request, and bytes per request as
// EventBridge counts them (see entrySize).
const (
	MaxEntries = 10
	MaxBytes   = 256 << 10
)

// DefaultSource is the events' source when Options.Source is empty.
const DefaultSource = "lambdajobs"

// Bus is a driver.Bus over one EventBridge event bus.
type Bus struct {
	api    API
	name   string
	source string
	now    func() time.Time
}

var _ driver.Bus = (*Bus)(nil)

// Options configures a Bus.
type Options struct {
	// Source is the events' source (default DefaultSource): what a rule
	// matches on, with the detail type.
	Source string
	// Now stamps each entry's time (default time.Now).
	Now func() time.Time
}

// New returns a Bus putting events on the bus named name (a name or an
// ARN).
func New(api API, name string, opts Options) *Bus {
	b := &Bus{api: api, name: name, source: opts.Source, now: opts.Now}
	if b.source == "" {
		b.source = DefaultSource
	}
	if b.now == nil {
		b.now = time.Now
	}
	return b
}

// Put puts evs in requests of at most MaxEntries entries and MaxBytes. An
// entry EventBridge refuses (the response's FailedEntryCount; each refused
// entry carries an error code) is put once more in the same call; one
// still refused is reported not accepted, never as sent. A request that
// fails as a whole reports its entries not accepted and Put returns its
// error after trying the other requests.
func (b *Bus) Put(ctx context.Context, evs []driver.Event) ([]bool, error) {
	accepted := make([]bool, len(evs))
	var firstErr error
	for _, chunk := range b.chunks(evs) {
		left := chunk
		for try := 0; try < 2 && len(left) > 0; try++ {
			var err error
			if left, err = b.put(ctx, evs, left, accepted); err != nil {
				if firstErr == nil {
					firstErr = err
				}
				break
			}
		}
	}
	return accepted, firstErr
}

// put sends the entries idx of evs in one request, marks those accepted,
// and returns the indexes refused.
func (b *Bus) put(ctx context.Context, evs []driver.Event, idx []int, accepted []bool) ([]int, error) {
	at := float64(b.now().UnixMilli()) / 1e3
	entries := make([]Entry, len(idx))
	for i, j := range idx {
		entries[i] = Entry{EventBusName: b.name, Source: b.source, DetailType: evs[j].DetailType, Detail: string(evs[j].Detail), Time: at}
	}
	out, err := b.api.PutEvents(ctx, &PutEventsInput{Entries: entries})
	if err != nil {
		return idx, fmt.Errorf("eventbus: put events: %w", err)
	}
	var refused []int
	for i, j := range idx {
		// An entry is accepted when its result has an event id and no error
		// code; a response shorter than the request accepts nothing more.
		if i < len(out.Entries) && out.Entries[i].ErrorCode == "" && out.Entries[i].EventID != "" {
			accepted[j] = true
			continue
		}
		refused = append(refused, j)
	}
	return refused, nil
}

// chunks splits evs into requests PutEvents takes (by index).
func (b *Bus) chunks(evs []driver.Event) [][]int {
	var out [][]int
	var cur []int
	size := 0
	for i, ev := range evs {
		n := b.entrySize(ev)
		if len(cur) == MaxEntries || (len(cur) > 0 && size+n > MaxBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, i)
		size += n
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// entrySize is an entry's size as EventBridge counts it: its time (14
// bytes), source, detail type and detail in UTF-8.
func (b *Bus) entrySize(ev driver.Event) int {
	return 14 + len(b.source) + len(ev.DetailType) + len(ev.Detail)
}
