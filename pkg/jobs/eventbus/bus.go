// Package eventbus publishes job events to an Amazon EventBridge event bus
// (PutEvents, with the SDK's EventBridge client): the driver.Bus of a
// deployment. docs/reference/EVENTS.md describes the events.
package eventbus

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/lambdajobs/lambdajobs/internal/wallclock"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// API is the part of the SDK's EventBridge client the bus uses: an
// *eventbridge.Client, or a test's fake.
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var _ API = (*eventbridge.Client)(nil)

// PutEvents' limits: entries per request, and bytes per request as
// EventBridge counts them (see entrySize).
const (
	MaxEntries = 10
	MaxBytes   = 256 << 10
)

// DefaultSource is the events' source when Config.Source is empty.
const DefaultSource = "lambdajobs"

// Bus is a driver.Bus over one EventBridge event bus.
type Bus struct {
	api    API
	name   string
	source string
	clock  jobs.Clock
}

var _ driver.Bus = (*Bus)(nil)

// Config configures a Bus.
type Config struct {
	// Source is the events' source (default DefaultSource): what a rule
	// matches on, with the detail type.
	Source string
	// Clock stamps each entry's time (default the wall clock).
	Clock jobs.Clock
}

// New returns a Bus putting events on the bus named name (a name or an
// ARN).
func New(api API, name string, opts Config) *Bus {
	b := &Bus{api: api, name: name, source: opts.Source, clock: opts.Clock}
	if b.source == "" {
		b.source = DefaultSource
	}
	if b.clock == nil {
		b.clock = wallclock.Clock{}
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
	at := b.clock.Now()
	entries := make([]types.PutEventsRequestEntry, len(idx))
	for i, j := range idx {
		entries[i] = types.PutEventsRequestEntry{EventBusName: aws.String(b.name), Source: aws.String(b.source),
			DetailType: aws.String(evs[j].DetailType), Detail: aws.String(string(evs[j].Detail)), Time: aws.Time(at)}
	}
	out, err := b.api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
	if err != nil {
		return idx, fmt.Errorf("eventbus: put events: %w", err)
	}
	var refused []int
	for i, j := range idx {
		// An entry is accepted when its result has an event id and no error
		// code; a response shorter than the request accepts nothing more.
		if i < len(out.Entries) && aws.ToString(out.Entries[i].ErrorCode) == "" && aws.ToString(out.Entries[i].EventId) != "" {
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
