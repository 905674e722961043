package jobstest

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// MemBus is an in-memory driver.Bus that records the events it accepts,
// for tests and the local stack. Its zero value is ready to use.
type MemBus struct {
	mu     sync.Mutex
	events []driver.Event
	fail   error
	reject int
	puts   int
}

var _ driver.Bus = (*MemBus)(nil)

// Put accepts evs, except when SetFail set an error (then none) or Reject
// asked to refuse some (a partial failure, as PutEvents' FailedEntryCount).
func (b *MemBus) Put(_ context.Context, evs []driver.Event) ([]bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.puts++
	if b.fail != nil {
		return nil, b.fail
	}
	accepted := make([]bool, len(evs))
	for i, ev := range evs {
		if b.reject > 0 {
			b.reject--
			continue
		}
		accepted[i] = true
		b.events = append(b.events, ev)
	}
	return accepted, nil
}

// SetFail makes every Put fail with err (nil: succeed again).
func (b *MemBus) SetFail(err error) {
	b.mu.Lock()
	b.fail = err
	b.mu.Unlock()
}

// Reject makes the bus refuse the next n entries it is given, accepting
// the rest of their requests.
func (b *MemBus) Reject(n int) {
	b.mu.Lock()
	b.reject = n
	b.mu.Unlock()
}

// Puts returns how many requests the bus got.
func (b *MemBus) Puts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.puts
}

// Events returns the details of the accepted events, in order (a detail
// that does not decode is skipped: MemBus records only job events).
func (b *MemBus) Events() []jobs.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]jobs.Event, 0, len(b.events))
	for _, ev := range b.events {
		var e jobs.Event
		if json.Unmarshal(ev.Detail, &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// Raw returns the accepted events as sent.
func (b *MemBus) Raw() []driver.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]driver.Event(nil), b.events...)
}
