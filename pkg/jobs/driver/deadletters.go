package driver

import "context"

// DeadLetter is one message received from a lane's dead-letter queue: its
// body as it was sent, and the receipt handle that deletes or releases it.
type DeadLetter struct {
	Body    string
	Receipt string
}

// DeadLetterQueue reads the dead-letter queue of each lane's queue for the
// Sweeper, which settles the job references among them (a dead letter may
// be the last thing that names its job) and leaves every other message
// for the operators. The SQS implementation is sqsqueue.DeadLetters; the
// engine never sees SQS.
type DeadLetterQueue interface {
	// Lanes are the lanes whose dead-letter queues it reads ("" is the
	// default lane's).
	Lanes() []string
	// ReceiveDead receives up to max messages of lane's dead-letter queue,
	// each once; they stay hidden from other receivers until deleted or
	// released (or, if neither comes, for a while longer than the caller's
	// context lasts). None: the queue holds no visible message.
	ReceiveDead(ctx context.Context, lane string, max int) ([]DeadLetter, error)
	// DeleteDead deletes the message received with receipt.
	DeleteDead(ctx context.Context, lane, receipt string) error
	// ReleaseDead makes the message received with receipt visible again
	// at once.
	ReleaseDead(ctx context.Context, lane, receipt string) error
}
