package jobstest

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// MemQueue is also an in-memory driver.DeadLetterQueue: AddDeadLetter
// puts a message in a lane's dead-letter queue (as SQS does past
// maxReceiveCount, or as anyone able to send to it would), and
// DeadLetters shows what is left there.

// memDead is one message of a lane's dead-letter queue.
type memDead struct {
	body    string
	receipt string // its latest receipt; "" while visible
}

// AddDeadLetter puts a message with body in lane's dead-letter queue.
func (q *MemQueue) AddDeadLetter(lane, body string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dead == nil {
		q.dead = map[string][]*memDead{}
	}
	q.dead[lane] = append(q.dead[lane], &memDead{body: body})
}

// DeadLetters returns the bodies in lane's dead-letter queue, visible or
// received, in the order they came.
func (q *MemQueue) DeadLetters(lane string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, m := range q.dead[lane] {
		out = append(out, m.body)
	}
	return out
}

// Lanes are the default lane and every lane given a dead letter, sorted.
func (q *MemQueue) Lanes() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := []string{""}
	for lane := range q.dead {
		if lane != "" {
			out = append(out, lane)
		}
	}
	sort.Strings(out[1:])
	return out
}

// ReceiveDead receives up to max visible messages of lane's dead-letter
// queue; they stay hidden until deleted or released.
func (q *MemQueue) ReceiveDead(_ context.Context, lane string, max int) ([]driver.DeadLetter, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []driver.DeadLetter
	for _, m := range q.dead[lane] {
		if len(out) == max {
			break
		}
		if m.receipt != "" {
			continue
		}
		q.receipts++
		m.receipt = fmt.Sprintf("%s#%d", lane, q.receipts)
		out = append(out, driver.DeadLetter{Body: m.body, Receipt: m.receipt})
	}
	return out, nil
}

// DeleteDead deletes the message received with receipt (nothing if it is
// not its latest receipt).
func (q *MemQueue) DeleteDead(_ context.Context, lane, receipt string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead[lane] = slices.DeleteFunc(q.dead[lane], func(m *memDead) bool { return receipt != "" && m.receipt == receipt })
	return nil
}

// ReleaseDead makes the message received with receipt visible again.
func (q *MemQueue) ReleaseDead(_ context.Context, lane, receipt string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.dead[lane] {
		if receipt != "" && m.receipt == receipt {
			m.receipt = ""
		}
	}
	return nil
}

var _ driver.DeadLetterQueue = (*MemQueue)(nil)
