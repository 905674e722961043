package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// DeadLetterAPI is the part of the SQS client DeadLetters uses.
type DeadLetterAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// DeadLetters reads and redrives the dead-letter queue of each lane's
// queue. The operators' API routes serve it from a function that is one of
// the queues' known senders, so that no person needs sqs:SendMessage on a
// queue (whose policy denies it to anyone else): SQS's own redrive (the
// console's "Start DLQ redrive", StartMessageMoveTask) sends with the
// caller's identity and is denied.
//
// A redrive moves a message only as far as the system would have sent it
// itself: by default only job references (wire.SortJob, which name a job
// in the store and carry nothing a sender could forge). A message of any
// other sort (an S3 record, an EventBridge event, an SNS notification, an
// envelope, a schedule's fire) may have been planted in the dead-letter
// queue by anyone able to send to it; it moves only when the operator
// asks (RedriveOpts.AnyShape), after a peek has shown its sender. An
// envelope without an idempotency key never moves: its job's id derives
// from the SQS message id, so sending its body again would make a second
// job. A redrive keeps the message's group (MessageGroupId, the fair
// queues' tenant).
type DeadLetters struct {
	SQS      DeadLetterAPI
	QueueURL string
	DLQURL   string
	// LaneQueueURLs are the other lanes' queues, by lane, whose depths
	// Depths reads too, and where their dead letters go back.
	LaneQueueURLs map[string]string
	// LaneDLQURLs are the other lanes' dead-letter queues, by lane: each
	// is read and redriven (to the lane's own queue, in LaneQueueURLs) as
	// the default lane's is.
	LaneDLQURLs map[string]string
}

// DeadLetter is one message of a dead-letter queue, described by its
// shape, never its body (which may hold anything).
type DeadLetter struct {
	ID       string    `json:"id"`
	Shape    string    `json:"shape"`
	Receives int       `json:"receives"`
	SentAt   time.Time `json:"sent_at"`
	// Why says why a message of this sort reaches the dead-letter queue
	// (SQS keeps no reason; the worker's log line names the message id).
	Why string `json:"why"`
	// Sort is the sort of message it is (wire.MessageSort: job,
	// schedule_fire, s3, eventbridge, sns, envelope,
	// envelope_without_key, other).
	Sort string `json:"sort"`
	// Sender is who sent it: SQS's SenderId (an IAM user's or role's
	// unique id, "AROA...:session" for a role's session, or the account
	// of a service). A message SQS moved here keeps its first sender.
	Sender string `json:"sender"`
	// Redrive says what a redrive does with it: RedriveMoves,
	// RedriveOnlyAnyShape or RedriveNever.
	Redrive string `json:"redrive"`
}

// What a redrive does with a dead letter (DeadLetter.Redrive).
const (
	// RedriveMoves: a job reference; any redrive moves it.
	RedriveMoves = "moves"
	// RedriveOnlyAnyShape: a foreign message, a fire or a keyed envelope;
	// only a redrive with RedriveOpts.AnyShape moves it.
	RedriveOnlyAnyShape = "only_any_shape"
	// RedriveNever: an envelope without an idempotency key, which a
	// redrive would make into a second job.
	RedriveNever = "never"
)

// Depths are the approximate numbers of messages (visible and in flight)
// in the queue and in its dead-letter queue, and in each other lane's
// queue (DeadLetters.LaneQueueURLs) and dead-letter queue
// (DeadLetters.LaneDLQURLs).
type Depths struct {
	Queue           int            `json:"queue"`
	DeadLetters     int            `json:"dead_letters"`
	Lanes           map[string]int `json:"lanes,omitempty"`
	LaneDeadLetters map[string]int `json:"lane_dead_letters,omitempty"`
}

// ErrNoSuchDeadLetter: Redrive did not find the message (redriven or
// expired meanwhile).
var ErrNoSuchDeadLetter = errors.New("sqsqueue: the message is no longer in the dead-letter queue")

// ErrNoSuchLane: a lane that DeadLetters does not serve.
var ErrNoSuchLane = errors.New("sqsqueue: no such lane")

// RefusedError is what a redrive of one message returns when it found the
// message and left it in the dead-letter queue: it is not a job reference
// and RedriveOpts.AnyShape was not set, or it is an envelope without an
// idempotency key, which no redrive moves.
type RefusedError struct {
	Sort string // wire.MessageSort's
	// Never is set for a message no redrive moves.
	Never bool
}

func (e *RefusedError) Error() string {
	return "sqsqueue: not redriven: " + Refusal(e.Sort)
}

// Refusal says why a redrive leaves a message of this sort in the
// dead-letter queue ("" for a job reference, which it moves).
func Refusal(msgSort string) string {
	switch msgSort {
	case wire.SortJob:
		return ""
	case wire.SortEnvelopeWithoutKey:
		return "an envelope without an idempotency key: its job's id derives from the SQS message id, so a redrive would make a second job; no redrive moves it (enqueue its job again through the API)"
	}
	return "a message of sort " + msgSort + ", not a job reference: anyone able to send to the dead-letter queue could have planted it; check its sender (a peek shows it), then redrive it with \"shapes\": \"any\""
}

// redriveOf is what a redrive does with a message of this sort.
func redriveOf(msgSort string) string {
	switch msgSort {
	case wire.SortJob:
		return RedriveMoves
	case wire.SortEnvelopeWithoutKey:
		return RedriveNever
	}
	return RedriveOnlyAnyShape
}

// MaxRedrive is the most messages one redrive of all moves, and the most
// it leaves: a caller repeats it while it reports more and moved some.
const MaxRedrive = 100

// RedriveOpts say what one redrive moves.
type RedriveOpts struct {
	// Lane is the lane whose dead-letter queue it reads ("" the default
	// lane); its messages go back to that lane's queue.
	Lane string
	// ID is the message to move; "" moves all (up to MaxRedrive).
	ID string
	// AnyShape moves messages of every sort, not only job references:
	// set it only once a peek has shown who sent them. An envelope without
	// an idempotency key never moves.
	AnyShape bool
}

// RedriveResult is what one redrive did.
type RedriveResult struct {
	Redriven int
	// Skipped counts the messages left in the dead-letter queue, by sort
	// (Refusal says why).
	Skipped map[string]int
	// More is set when more messages may be left to move (the redrive
	// stopped at MaxRedrive, or on an error after it moved some).
	More bool
}

// queues returns the queue and dead-letter queue of lane.
func (d *DeadLetters) queues(lane string) (queue, dlq string, err error) {
	if lane == "" {
		return d.QueueURL, d.DLQURL, nil
	}
	queue, dlq = d.LaneQueueURLs[lane], d.LaneDLQURLs[lane]
	if queue == "" || dlq == "" {
		return "", "", fmt.Errorf("%w %q", ErrNoSuchLane, lane)
	}
	return queue, dlq, nil
}

// Lanes are the lanes whose dead-letter queues DeadLetters serves: "" (the
// default lane), then the others, sorted.
func (d *DeadLetters) Lanes() []string {
	out := []string{""}
	for lane := range d.LaneDLQURLs {
		if d.LaneQueueURLs[lane] != "" {
			out = append(out, lane)
		}
	}
	sort.Strings(out[1:])
	return out
}

// Depths reads the queues' attributes; it changes nothing.
func (d *DeadLetters) Depths(ctx context.Context) (Depths, error) {
	count := func(url string) (int, error) {
		out, err := d.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return 0, fmt.Errorf("sqsqueue: queue attributes: %w", err)
		}
		a, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
		b, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		return a + b, nil
	}
	q, err := count(d.QueueURL)
	if err != nil {
		return Depths{}, err
	}
	dl, err := count(d.DLQURL)
	if err != nil {
		return Depths{}, err
	}
	out := Depths{Queue: q, DeadLetters: dl}
	each := func(urls map[string]string, into *map[string]int) error {
		for lane, url := range urls {
			n, err := count(url)
			if err != nil {
				return err
			}
			if *into == nil {
				*into = map[string]int{}
			}
			(*into)[lane] = n
		}
		return nil
	}
	if err := each(d.LaneQueueURLs, &out.Lanes); err != nil {
		return Depths{}, err
	}
	if err := each(d.LaneDLQURLs, &out.LaneDeadLetters); err != nil {
		return Depths{}, err
	}
	return out, nil
}

func (d *DeadLetters) receive(ctx context.Context, dlq string, visibility int32) ([]types.Message, error) {
	return d.receiveWaiting(ctx, dlq, visibility, 0)
}

// receiveWaiting is receive, long-polling for wait seconds: a short poll
// samples some of SQS's servers and may answer nothing though messages
// wait; a long poll asks them all.
func (d *DeadLetters) receiveWaiting(ctx context.Context, dlq string, visibility, wait int32) ([]types.Message, error) {
	out, err := d.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(dlq), MaxNumberOfMessages: 10, VisibilityTimeout: visibility, WaitTimeSeconds: wait,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount,
			types.MessageSystemAttributeNameSentTimestamp, types.MessageSystemAttributeNameSenderId, types.MessageSystemAttributeNameMessageGroupId},
	})
	if err != nil {
		return nil, fmt.Errorf("sqsqueue: receive dead letters: %w", err)
	}
	return out.Messages, nil
}

// release makes the messages visible again at once.
func (d *DeadLetters) release(ctx context.Context, dlq string, msgs []types.Message) {
	for _, m := range msgs {
		_, _ = d.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(dlq), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
	}
}

// Peek receives up to max messages of the default lane's dead-letter queue
// for a few seconds and releases them at once (see PeekLane).
func (d *DeadLetters) Peek(ctx context.Context, max int) ([]DeadLetter, error) {
	return d.PeekLane(ctx, "", max)
}

// PeekLane receives up to max messages of lane's dead-letter queue for a
// few seconds and releases them at once, describing each by its shape,
// sort and sender. (Receiving is the only way SQS shows a message: it
// counts a receive, and hides the message from others for those seconds.)
func (d *DeadLetters) PeekLane(ctx context.Context, lane string, max int) ([]DeadLetter, error) {
	_, dlq, err := d.queues(lane)
	if err != nil {
		return nil, err
	}
	seen := map[string]DeadLetter{}
	var held []types.Message
	defer func() { d.release(context.WithoutCancel(ctx), dlq, held) }()
	for round := 0; round < 10 && len(seen) < max; round++ {
		msgs, err := d.receive(ctx, dlq, 10)
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			break
		}
		held = append(held, msgs...)
		for _, m := range msgs {
			id := aws.ToString(m.MessageId)
			rc, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
			ms, _ := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
			body := aws.ToString(m.Body)
			msgSort := wire.MessageSort(body)
			seen[id] = DeadLetter{ID: id, Shape: wire.DescribeShape(body), Why: Why(body), Receives: rc, SentAt: time.UnixMilli(ms).UTC(),
				Sort: msgSort, Sender: m.Attributes[string(types.MessageSystemAttributeNameSenderId)], Redrive: redriveOf(msgSort)}
		}
	}
	out := make([]DeadLetter, 0, len(seen))
	for _, dl := range seen {
		out = append(out, dl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SentAt.Before(out[j].SentAt) })
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// move sends a message's body back to queue, in its group, then deletes
// it from the dead-letter queue (a crash in between leaves a duplicate,
// which the worker makes one job of).
func (d *DeadLetters) move(ctx context.Context, queue, dlq string, m types.Message) error {
	var group *string
	if g := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "" {
		group = aws.String(g)
	}
	if _, err := d.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue), MessageBody: m.Body, MessageGroupId: group}); err != nil {
		return fmt.Errorf("sqsqueue: redrive: %w", err)
	}
	if _, err := d.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlq), ReceiptHandle: m.ReceiptHandle}); err != nil {
		return fmt.Errorf("sqsqueue: redrive: %w", err)
	}
	return nil
}

// refused is the RefusedError for a message a redrive with these options
// leaves, or nil when it moves it.
func refused(body string, anyShape bool) *RefusedError {
	msgSort := wire.MessageSort(body)
	switch redriveOf(msgSort) {
	case RedriveNever:
		return &RefusedError{Sort: msgSort, Never: true}
	case RedriveOnlyAnyShape:
		if !anyShape {
			return &RefusedError{Sort: msgSort}
		}
	}
	return nil
}

// Redrive moves the default lane's dead letter with this id back to the
// queue if it is a job reference; it returns ErrNoSuchDeadLetter, or a
// *RefusedError for a message of another sort (see RedriveWith).
func (d *DeadLetters) Redrive(ctx context.Context, id string) error {
	_, err := d.RedriveWith(ctx, RedriveOpts{ID: id})
	return err
}

// RedriveAll moves up to MaxRedrive of the default lane's job references
// back to the queue and returns how many it moved, leaving every other
// sort of message (see RedriveWith).
func (d *DeadLetters) RedriveAll(ctx context.Context) (int, error) {
	r, err := d.RedriveWith(ctx, RedriveOpts{})
	return r.Redriven, err
}

// RedriveWith moves dead letters of opts.Lane back to that lane's queue:
// the message opts.ID (ErrNoSuchDeadLetter when it is not there, a
// *RefusedError when opts forbid moving it), or, without an id, up to
// MaxRedrive of the messages opts allow, counting those it leaves.
func (d *DeadLetters) RedriveWith(ctx context.Context, opts RedriveOpts) (RedriveResult, error) {
	queue, dlq, err := d.queues(opts.Lane)
	if err != nil {
		return RedriveResult{}, err
	}
	if opts.ID != "" {
		if err := d.redriveOne(ctx, queue, dlq, opts); err != nil {
			return RedriveResult{}, err
		}
		return RedriveResult{Redriven: 1}, nil
	}
	// Messages left stay hidden until the end, so that the receives go on
	// to the others; then they are released at once.
	var held []types.Message
	defer func() { d.release(context.WithoutCancel(ctx), dlq, held) }()
	res := RedriveResult{Skipped: map[string]int{}}
	skipped := map[string]bool{}
	for res.Redriven < MaxRedrive && len(skipped) < MaxRedrive {
		msgs, err := d.receive(ctx, dlq, 30)
		if err != nil || len(msgs) == 0 {
			res.More = err != nil && res.Redriven > 0
			return res, err
		}
		for i, m := range msgs {
			if res.Redriven == MaxRedrive || len(skipped) == MaxRedrive {
				held = append(held, msgs[i:]...)
				break
			}
			if r := refused(aws.ToString(m.Body), opts.AnyShape); r != nil {
				held = append(held, m)
				if id := aws.ToString(m.MessageId); !skipped[id] {
					skipped[id] = true
					res.Skipped[r.Sort]++
				}
				continue
			}
			if err := d.move(ctx, queue, dlq, m); err != nil {
				held = append(held, msgs[i:]...)
				res.More = res.Redriven > 0
				return res, err
			}
			res.Redriven++
		}
	}
	res.More = true
	return res, nil
}

// redriveOne moves the message opts.ID, releasing at once the others it
// receives while looking for it.
func (d *DeadLetters) redriveOne(ctx context.Context, queue, dlq string, opts RedriveOpts) error {
	var held []types.Message
	defer func() { d.release(context.WithoutCancel(ctx), dlq, held) }()
	for round := 0; round < 20; round++ {
		msgs, err := d.receive(ctx, dlq, 30)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			break
		}
		var found *types.Message
		for _, m := range msgs {
			if aws.ToString(m.MessageId) == opts.ID {
				found = &m
			} else {
				held = append(held, m) // released at once, whichever came after it
			}
		}
		if found != nil {
			if r := refused(aws.ToString(found.Body), opts.AnyShape); r != nil {
				held = append(held, *found)
				return r
			}
			return d.move(ctx, queue, dlq, *found)
		}
	}
	return ErrNoSuchDeadLetter
}

// Why says why a message like body reaches the dead-letter queue, from
// what sort of message it is: a job's own message comes back while its job
// cannot be claimed or settled; a schedule's fire, while its job cannot be
// made; anything else is a message no route accepted. The worker logs the
// reason with the message id each time it gives a message back.
func Why(body string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &obj) != nil {
		return "no route accepts a message that is not JSON"
	}
	switch {
	case len(obj) == 1 && obj["job_id"] != nil:
		return "a job's message: its job could not be found, claimed or settled in 10 receives (the worker's log names this message id)"
	case obj["lambdajobs_schedule"] != nil:
		return "a schedule's fire whose job could not be made in 10 receives (a bad scheduled time, or the store was unavailable)"
	}
	return "no route accepts a message of this shape (the worker logs \"no route accepts this message\" with its id)"
}

// DeadLetters is the Sweeper's driver.DeadLetterQueue: it receives each
// lane's dead letters, and deletes those whose job it settled and releases
// the others at once (see jobs.Config.DeadLetters).
var _ driver.DeadLetterQueue = (*DeadLetters)(nil)

// ReceiveDead receives up to limit messages of lane's dead-letter queue,
// hidden until deleted or released, or else until a while after ctx's
// deadline (5 minutes without one), so that a sweeper that dies holding
// them gives them back.
func (d *DeadLetters) ReceiveDead(ctx context.Context, lane string, limit int) ([]driver.DeadLetter, error) {
	_, dlq, err := d.queues(lane)
	if err != nil {
		return nil, err
	}
	hide := 5 * time.Minute
	if dl, ok := ctx.Deadline(); ok {
		hide = time.Until(dl) + 30*time.Second
	}
	visibility := int32(min(max(hide, 30*time.Second), 12*time.Hour) / time.Second)
	var out []driver.DeadLetter
	at := map[string]int{} // message id -> its index in out
	for round := 0; len(out) < limit && round < limit/10+5; round++ {
		msgs, err := d.receiveWaiting(ctx, dlq, visibility, 1)
		if err != nil {
			if len(out) > 0 {
				break // settle those received; the rest wait for the next sweep
			}
			return nil, err
		}
		if len(msgs) == 0 {
			break
		}
		for i, m := range msgs {
			dl := driver.DeadLetter{Body: aws.ToString(m.Body), Receipt: aws.ToString(m.ReceiptHandle)}
			if j, ok := at[aws.ToString(m.MessageId)]; ok {
				out[j] = dl // received again: only its latest receipt deletes it
				continue
			}
			if len(out) == limit {
				d.release(context.WithoutCancel(ctx), dlq, msgs[i:])
				break
			}
			at[aws.ToString(m.MessageId)] = len(out)
			out = append(out, dl)
		}
	}
	return out, nil
}

// DeleteDead deletes the message of lane's dead-letter queue received
// with receipt.
func (d *DeadLetters) DeleteDead(ctx context.Context, lane, receipt string) error {
	_, dlq, err := d.queues(lane)
	if err != nil {
		return err
	}
	if _, err := d.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(dlq), ReceiptHandle: aws.String(receipt)}); err != nil {
		return fmt.Errorf("sqsqueue: delete dead letter: %w", err)
	}
	return nil
}

// ReleaseDead makes the message of lane's dead-letter queue received with
// receipt visible again at once.
func (d *DeadLetters) ReleaseDead(ctx context.Context, lane, receipt string) error {
	_, dlq, err := d.queues(lane)
	if err != nil {
		return err
	}
	if _, err := d.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(dlq), ReceiptHandle: aws.String(receipt), VisibilityTimeout: 0}); err != nil {
		return fmt.Errorf("sqsqueue: release dead letter: %w", err)
	}
	return nil
}
