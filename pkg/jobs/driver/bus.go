package driver

import (
	"context"
	"encoding/json"
)

// Bus publishes job events (Amazon EventBridge's PutEvents in package
// eventbus). Each event carries its own stable id in its detail, so a
// consumer can drop the duplicates that at-least-once delivery brings.
type Bus interface {
	// Put publishes evs, in as few requests as the bus allows, and reports
	// for each whether the bus accepted it. An event it did not accept
	// (a partial failure, or err for a request that failed as a whole)
	// must be put again later: the caller keeps it pending. Put never
	// reports an event accepted that the bus did not acknowledge.
	Put(ctx context.Context, evs []Event) (accepted []bool, err error)
}

// Event is one event for a Bus: its detail type and its detail, a JSON
// object.
type Event struct {
	DetailType string
	Detail     json.RawMessage
}
