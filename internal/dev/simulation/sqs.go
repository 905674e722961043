package simulation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// sqs is a simulated SQS standard queue per lane, each with its
// dead-letter queue (which the sweepers drain: gatedDeadLetters), as AWS
// documents them: a received message stays
// invisible for the visibility timeout; each receive counts, and the
// receive past maxReceiveCount moves it to the DLQ instead; a message can
// be delivered again while in flight (a duplicate), even twice in one
// batch; a delete with the latest receipt handle removes it, and with an
// older one succeeds and deletes nothing.
type sqs struct {
	w          *world
	visibility time.Duration
	maxReceive int
	queues     map[string]*queue // lane -> queue
	nextID     int
	// mu guards the queues: a poller reads when to look again outside
	// the scheduler's turns.
	mu sync.Mutex
}

type queue struct {
	lane string
	msgs []*sqsMessage
	dlq  []*sqsMessage
	// sent is closed (and replaced) when a message is sent: a long poll
	// that waits answers then.
	sent chan struct{}
}

type sqsMessage struct {
	id       string
	jobID    string
	firstAt  time.Time // driver.Message.SentAt
	group    string
	sentAt   time.Time
	visible  time.Time
	receives int
	handle   string // the latest receipt handle
}

func newSQS(w *world, lanes []string, visibility time.Duration, maxReceive int) *sqs {
	q := &sqs{w: w, visibility: visibility, maxReceive: maxReceive, queues: map[string]*queue{}}
	for _, l := range lanes {
		q.queues[l] = &queue{lane: l, sent: make(chan struct{})}
	}
	return q
}

// send puts msgs on their lanes' queues (called in a Send's turn).
func (q *sqs) send(msgs []driver.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	for _, m := range msgs {
		lq := q.queues[m.Lane]
		if lq == nil {
			q.w.violate("a message was sent to lane %q, which has no queue", m.Lane)
			continue
		}
		q.nextID++
		lq.msgs = append(lq.msgs, &sqsMessage{id: fmt.Sprintf("m%d", q.nextID), jobID: m.JobID, firstAt: m.SentAt, group: m.Group, sentAt: now, visible: now.Add(m.Delay)})
		close(lq.sent)
		lq.sent = make(chan struct{})
	}
}

// longPoll waits, as a receive's long poll does (up to 20 s), until a
// message of lane may be visible: one is sent, or one's visibility or
// delay ends. False when ctx ended.
func (q *sqs) longPoll(ctx context.Context, lane string) bool {
	q.mu.Lock()
	lq := q.queues[lane]
	sent := lq.sent
	now := time.Now()
	wait := time.Duration(0) // none: until one is sent
	for _, m := range lq.msgs {
		if wait == 0 {
			wait = 20 * time.Second
		}
		if d := m.visible.Sub(now); d < wait {
			wait = max(d, time.Millisecond)
		}
	}
	q.mu.Unlock()
	var tc <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-tc:
	case <-sent:
	case <-ctx.Done():
		return false
	}
	return true
}

// receive takes up to max visible messages of lane, in send order; dup
// adds one message that is in flight (a duplicate delivery), or the same
// message twice, as SQS standard queues may.
func (q *sqs) receive(lane string, max int, dup int) []events.SQSMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	lq := q.queues[lane]
	now := time.Now()
	var got []events.SQSMessage
	take := func(m *sqsMessage) bool {
		m.receives++
		if m.receives > q.maxReceive {
			lq.dlq = append(lq.dlq, m)
			q.w.cover("sqs", "dead-lettered")
			return false
		}
		m.visible = now.Add(q.visibility)
		m.handle = fmt.Sprintf("%s#%d", m.id, m.receives)
		attrs := map[string]string{"ApproximateReceiveCount": fmt.Sprint(m.receives)}
		if m.group != "" {
			attrs["MessageGroupId"] = m.group
		}
		got = append(got, events.SQSMessage{MessageId: m.id, ReceiptHandle: m.handle, Body: message.EncodeSent(m.jobID, m.firstAt), Attributes: attrs})
		return true
	}
	var inFlight []*sqsMessage
	lq.msgs = slices.DeleteFunc(lq.msgs, func(m *sqsMessage) bool {
		if m.visible.After(now) {
			inFlight = append(inFlight, m)
			return false
		}
		if len(got) >= max {
			return false
		}
		return !take(m) // moved to the DLQ
	})
	switch {
	case dup == 1 && len(inFlight) > 0 && len(got) < max:
		// A message another consumer holds, delivered again.
		m := inFlight[q.w.draw(len(inFlight))]
		take(m)
		q.w.cover("fault", "duplicate delivery")
	case dup == 2 && len(got) > 0 && len(got) < max:
		// The same message twice in one batch: two handles, the second
		// the latest.
		first := got[0]
		for _, m := range lq.msgs {
			if m.id == first.MessageId {
				take(m)
				q.w.cover("fault", "duplicate in one batch")
				break
			}
		}
	}
	return got
}

// remove deletes the message whose receipt handle is handle, if it is the
// latest one (AWS: an older handle's delete succeeds and does nothing).
func (q *sqs) remove(lane, handle string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	lq := q.queues[lane]
	for i, m := range lq.msgs {
		if m.handle == handle {
			lq.msgs = slices.Delete(lq.msgs, i, i+1)
			return
		}
	}
	q.w.cover("sqs", "stale receipt handle")
}

// pending reports whether a message of jobID is on a queue (visible or in
// flight), and whether one is in a DLQ.
func (q *sqs) holds(jobID string) (queued, dead bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, lq := range q.queues {
		for _, m := range lq.msgs {
			if m.jobID == jobID {
				queued = true
			}
		}
		for _, m := range lq.dlq {
			if m.jobID == jobID {
				dead = true
			}
		}
	}
	return queued, dead
}

func (q *sqs) depth() (msgs, dead int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, lq := range q.queues {
		msgs += len(lq.msgs)
		dead += len(lq.dlq)
	}
	return msgs, dead
}

// gatedQueue is the driver.Queue an actor sends through.
type gatedQueue struct {
	a *actor
	q *sqs
}

func (g gatedQueue) Send(ctx context.Context, msgs ...driver.Message) error {
	key := ""
	if len(msgs) > 0 {
		key = msgs[0].JobID
		if len(msgs) > 1 {
			key += fmt.Sprintf("+%d", len(msgs)-1)
		}
	}
	return g.a.do(ctx, "Send", key, func() error {
		g.q.send(msgs)
		return nil
	})
}

// deadVisibility is how long a dead letter the sweeper received stays
// hidden if it neither deletes nor releases it (its sweep died).
const deadVisibility = 2 * time.Minute

// receiveDead takes up to max visible messages of lane's dead-letter
// queue, each with a new receipt handle, hidden for deadVisibility.
func (q *sqs) receiveDead(lane string, max int) []driver.DeadLetter {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	var out []driver.DeadLetter
	for _, m := range q.queues[lane].dlq {
		if len(out) == max {
			break
		}
		if m.visible.After(now) {
			continue
		}
		m.receives++
		m.visible = now.Add(deadVisibility)
		m.handle = fmt.Sprintf("%s#dead%d", m.id, m.receives)
		out = append(out, driver.DeadLetter{Body: message.Encode(m.jobID), Receipt: m.handle})
	}
	return out
}

// deleteDead deletes the dead letter whose latest receipt handle is
// handle (an older one's delete does nothing, as on a queue).
func (q *sqs) deleteDead(lane, handle string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	lq := q.queues[lane]
	lq.dlq = slices.DeleteFunc(lq.dlq, func(m *sqsMessage) bool { return m.handle == handle })
}

// releaseDead makes the dead letter received with handle visible at once.
func (q *sqs) releaseDead(lane, handle string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.queues[lane].dlq {
		if m.handle == handle {
			m.visible = time.Now()
		}
	}
}

// gatedDeadLetters is the driver.DeadLetterQueue a sweeper drains through.
type gatedDeadLetters struct {
	a *actor
	q *sqs
}

func (g gatedDeadLetters) Lanes() []string {
	g.q.mu.Lock()
	defer g.q.mu.Unlock()
	lanes := slices.Collect(maps.Keys(g.q.queues))
	slices.Sort(lanes) // "" first
	return lanes
}

func (g gatedDeadLetters) ReceiveDead(ctx context.Context, lane string, max int) ([]driver.DeadLetter, error) {
	var out []driver.DeadLetter
	err := g.a.do(ctx, "ReceiveDead", lane, func() error {
		out = g.q.receiveDead(lane, max)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (g gatedDeadLetters) DeleteDead(ctx context.Context, lane, receipt string) error {
	return g.a.do(ctx, "DeleteDead", receipt, func() error {
		g.q.deleteDead(lane, receipt)
		return nil
	})
}

func (g gatedDeadLetters) ReleaseDead(ctx context.Context, lane, receipt string) error {
	return g.a.do(ctx, "ReleaseDead", receipt, func() error {
		g.q.releaseDead(lane, receipt)
		return nil
	})
}
