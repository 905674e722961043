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
	w *world
	// visibility is each lane's visibility timeout.
	visibility map[string]time.Duration
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
	id string
	// jobID is the job the message names: a reference's, or the job a
	// foreign message or a fire makes (its id derived from the message);
	// "" for a message no route takes.
	jobID    string
	body     string
	foreign  bool      // not a job reference: the dead-letter drain leaves it
	firstAt  time.Time // driver.Message.SentAt
	group    string
	hints    map[string]events.SQSMessageAttribute // message.EventAttributes
	sentAt   time.Time
	visible  time.Time
	receives int
	handle   string // the latest receipt handle
}

func newSQS(w *world, lanes []string, visibility map[string]time.Duration, maxReceive int) *sqs {
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
		lq.msgs = append(lq.msgs, &sqsMessage{id: fmt.Sprintf("m%d", q.nextID), jobID: m.JobID, body: message.EncodeSent(m.JobID, m.SentAt),
			firstAt: m.SentAt, group: m.Group, hints: message.EventAttributes(m), sentAt: now, visible: now.Add(m.Delay)})
		if m.Paused > 0 {
			q.w.cover("mechanism", "pause held a delivery")
		}
		if !m.SentAt.IsZero() {
			q.w.cover("sqs", "sent before its job was stored")
		}
		close(lq.sent)
		lq.sent = make(chan struct{})
	}
}

// sendForeign puts a message another service sends (body) on the
// default lane's queue; jobOf returns the id of the job it makes from the
// message's id ("" for none). Called in a turn.
func (q *sqs) sendForeign(body string, jobOf func(messageID string) string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	lq := q.queues[""]
	q.nextID++
	id := fmt.Sprintf("m%d", q.nextID)
	now := time.Now()
	lq.msgs = append(lq.msgs, &sqsMessage{id: id, jobID: jobOf(id), body: body, foreign: true, sentAt: now, visible: now})
	close(lq.sent)
	lq.sent = make(chan struct{})
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
			q.w.deadLettered(m)
			q.w.touched(m.jobID)
			if m.jobID != "" {
				q.w.track.received(m.jobID)
			}
			return false
		}
		m.visible = now.Add(q.visibility[lane])
		if m.foreign && m.jobID != "" {
			q.w.pauses.received(m.jobID, now)
		}
		m.handle = fmt.Sprintf("%s#%d", m.id, m.receives)
		attrs := map[string]string{"ApproximateReceiveCount": fmt.Sprint(m.receives)}
		if m.group != "" {
			attrs["MessageGroupId"] = m.group
		}
		got = append(got, events.SQSMessage{MessageId: m.id, ReceiptHandle: m.handle, Body: m.body, Attributes: attrs, MessageAttributes: m.hints})
		if m.jobID != "" {
			q.w.track.delivered(m.jobID, lane, now)
		}
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
			q.w.touched(m.jobID)
			return
		}
	}
	q.w.cover("sqs", "stale receipt handle")
}

// hide makes the message of lane whose latest receipt handle is handle
// invisible for d from now (ChangeMessageVisibility); an older handle
// changes nothing (SQS refuses it; the worker only logs either way).
func (q *sqs) hide(lane, handle string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range q.queues[lane].msgs {
		if m.handle == handle {
			if q.w.opts.PlantHideFor > 0 {
				d = q.w.opts.PlantHideFor
				q.w.cover("planted", "a hide too long")
			}
			m.visible = time.Now().Add(d)
			q.w.cover("sqs", "hidden until the run's lease ends")
			return
		}
	}
	q.w.cover("sqs", "stale receipt handle (hide)")
}

// net says what on the queues names a job: a message on its queue
// (visible, delayed or in flight), a job reference in a dead-letter queue
// (which the sweeper's drain settles), or a foreign message or fire in one
// (which the drain leaves for the operators).
type net struct{ queued, deadRef, deadForeign bool }

// nets returns, for each job a message names, what names it.
func (q *sqs) nets() map[string]net { return q.netsOf(nil) }

// netsOf returns what names each of the jobs ids (nil: every job).
func (q *sqs) netsOf(ids []string) map[string]net {
	q.mu.Lock()
	defer q.mu.Unlock()
	var want map[string]bool
	if ids != nil {
		want = map[string]bool{}
		for _, id := range ids {
			want[id] = true
		}
	}
	out := map[string]net{}
	for _, lq := range q.queues {
		for _, m := range lq.msgs {
			if m.jobID != "" && (want == nil || want[m.jobID]) {
				n := out[m.jobID]
				n.queued = true
				out[m.jobID] = n
			}
		}
		for _, m := range lq.dlq {
			if m.jobID != "" && (want == nil || want[m.jobID]) {
				n := out[m.jobID]
				n.deadRef = n.deadRef || !m.foreign
				n.deadForeign = n.deadForeign || m.foreign
				out[m.jobID] = n
			}
		}
	}
	return out
}

// inDLQ reports whether the message with id is in a dead-letter queue.
func (q *sqs) inDLQ(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, lq := range q.queues {
		for _, m := range lq.dlq {
			if m.id == id {
				return true
			}
		}
	}
	return false
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

// Hide is driver.Visibility: a worker hides a second delivery of a
// running job's message until the run's lease ends.
func (g gatedQueue) Hide(ctx context.Context, lane, receipt string, d time.Duration) error {
	return g.a.do(ctx, "Hide", receipt, func() error {
		g.q.hide(lane, receipt, d)
		return nil
	})
}

var _ driver.Visibility = gatedQueue{}

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
		out = append(out, driver.DeadLetter{Body: m.body, Receipt: m.handle})
		if m.jobID != "" {
			q.w.track.deadReceived(m.jobID)
		}
	}
	return out
}

// deleteDead deletes the dead letter whose latest receipt handle is
// handle (an older one's delete does nothing, as on a queue).
func (q *sqs) deleteDead(lane, handle string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	lq := q.queues[lane]
	lq.dlq = slices.DeleteFunc(lq.dlq, func(m *sqsMessage) bool {
		if m.handle == handle {
			q.w.touched(m.jobID)
			return true
		}
		return false
	})
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
