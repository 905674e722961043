package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// The operators' dead-letter routes: GET /v1/admin/dead-letters for the
// queues' depths (nothing changes), POST /v1/admin/dead-letters/peek to see
// up to {"max": n} messages of a lane's dead-letter queue ({"lane":
// "bulk"}; none: the default lane's) by their shape, sort and sender, POST
// /v1/admin/dead-letters/redrive with {"id": "..."} or {"all": true} (and
// a lane) to send messages back to the lane's queue. A redrive moves only
// job references unless the request says {"shapes": "any"} (see
// sqsqueue.DeadLetters). Served by a function that is one of the queues'
// known senders, so no person needs sqs:SendMessage on a queue.

// DeadLetters is what the dead-letter routes need: sqsqueue.DeadLetters.
// One that is also a DeadLetterLanes serves every lane and redrives by
// sort; one that is not serves the default lane only, and its Redrive and
// RedriveAll decide what moves.
type DeadLetters interface {
	Depths(ctx context.Context) (sqsqueue.Depths, error)
	Peek(ctx context.Context, max int) ([]sqsqueue.DeadLetter, error)
	Redrive(ctx context.Context, id string) error
	RedriveAll(ctx context.Context) (int, error)
}

// DeadLetterLanes is what the dead-letter routes use of a DeadLetters
// that serves each lane's dead-letter queue (sqsqueue.DeadLetters does):
// they name the lane, and a redrive says which sorts it moves.
type DeadLetterLanes interface {
	PeekLane(ctx context.Context, lane string, max int) ([]sqsqueue.DeadLetter, error)
	RedriveWith(ctx context.Context, opts sqsqueue.RedriveOpts) (sqsqueue.RedriveResult, error)
}

// MaxPeek is the most dead letters one peek shows.
const MaxPeek = 50

// Peeked is the answer of a peek: the lane's dead letters.
type Peeked struct {
	Lane        string                `json:"lane,omitempty"`
	DeadLetters []sqsqueue.DeadLetter `json:"dead_letters"`
}

// Redriven is how many messages a redrive sent back to the lane's queue,
// and whether more may be left: RedriveAnswer without what was left.
type Redriven struct {
	Lane     string `json:"lane,omitempty"`
	Redriven int    `json:"redriven"`
	More     bool   `json:"more"`
}

// RedriveAnswer is the answer of a redrive: how many messages went back
// to the lane's queue, how many a redrive of all left in the dead-letter
// queue and why, and whether more may be left (a redrive of all moves at
// most sqsqueue.MaxRedrive per request).
type RedriveAnswer struct {
	Lane     string    `json:"lane,omitempty"`
	Redriven int       `json:"redriven"`
	Skipped  []Skipped `json:"skipped,omitempty"`
	More     bool      `json:"more"`
}

// Skipped is how many dead letters of one sort a redrive of all left in
// the dead-letter queue, and why.
type Skipped struct {
	Sort  string `json:"sort"`
	Count int    `json:"count"`
	Why   string `json:"why"`
}

// The values of a redrive's "shapes": what it moves.
const (
	// RedriveJobs moves job references only (the default).
	RedriveJobs = "jobs"
	// RedriveAnyShape moves messages of any sort but envelopes without an
	// idempotency key.
	RedriveAnyShape = "any"
)

var errNoDeadLetters = &requestError{code: "not_found", detail: "this deployment serves no dead-letter routes"}

// defaultLaneOnly serves a DeadLetters that is not a DeadLetterLanes: the
// default lane, redriven as its own methods decide.
type defaultLaneOnly struct{ d DeadLetters }

func (o defaultLaneOnly) PeekLane(ctx context.Context, lane string, max int) ([]sqsqueue.DeadLetter, error) {
	if lane != "" {
		return nil, fmt.Errorf("%w %q", sqsqueue.ErrNoSuchLane, lane)
	}
	return o.d.Peek(ctx, max)
}

func (o defaultLaneOnly) RedriveWith(ctx context.Context, opts sqsqueue.RedriveOpts) (sqsqueue.RedriveResult, error) {
	switch {
	case opts.Lane != "":
		return sqsqueue.RedriveResult{}, fmt.Errorf("%w %q", sqsqueue.ErrNoSuchLane, opts.Lane)
	case opts.AnyShape:
		return sqsqueue.RedriveResult{}, &requestError{code: "invalid_request", detail: `this deployment's dead letters cannot be redriven by shape: leave out "shapes"`}
	case opts.ID != "":
		if err := o.d.Redrive(ctx, opts.ID); err != nil {
			return sqsqueue.RedriveResult{}, err
		}
		return sqsqueue.RedriveResult{Redriven: 1}, nil
	}
	n, err := o.d.RedriveAll(ctx)
	return sqsqueue.RedriveResult{Redriven: n, More: n == sqsqueue.MaxRedrive || (err != nil && n > 0)}, err
}

// deadLetterDepths serves GET /v1/admin/dead-letters: the queues' depths.
func (a *API) deadLetterDepths(ctx context.Context, _ events.APIGatewayV2HTTPRequest, _ routed) events.APIGatewayV2HTTPResponse {
	if a.deadLetters == nil {
		return problem(ctx, a.log, errNoDeadLetters)
	}
	d, err := a.deadLetters.Depths(ctx)
	if err != nil {
		return a.deadLettersUnavailable(ctx, err)
	}
	return jsonResponse(http.StatusOK, d)
}

// deadLettersUnavailable is the problem of a dead-letter call's error.
func (a *API) deadLettersUnavailable(ctx context.Context, err error) events.APIGatewayV2HTTPResponse {
	var refused *sqsqueue.RefusedError
	var re *requestError
	switch {
	case errors.Is(err, sqsqueue.ErrNoSuchDeadLetter), errors.As(err, &refused), errors.As(err, &re):
		return problem(ctx, a.log, err)
	case errors.Is(err, sqsqueue.ErrNoSuchLane):
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"lane": this deployment has no dead-letter queue for that lane`})
	}
	return problem(ctx, a.log, fmt.Errorf("%w: %w", jobs.ErrUnavailable, err))
}

// deadLetterAction serves POST /v1/admin/dead-letters/peek and /redrive.
func (a *API) deadLetterAction(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	if a.deadLetters == nil {
		return problem(ctx, a.log, errNoDeadLetters)
	}
	lanes, ok := a.deadLetters.(DeadLetterLanes)
	if !ok {
		lanes = defaultLaneOnly{a.deadLetters}
	}
	unavailable := func(err error) events.APIGatewayV2HTTPResponse { return a.deadLettersUnavailable(ctx, err) }
	badLane := func(lane string) error {
		if !driver.ValidLane(lane) {
			return &requestError{code: "invalid_request", detail: `"lane" is a lane's name, or absent for the default lane`}
		}
		return nil
	}
	switch rq.params["action"] {
	case "peek":
		var in struct {
			Max  int    `json:"max"`
			Lane string `json:"lane"`
		}
		if err := optionalBody(req, &in); err != nil {
			return problem(ctx, a.log, err)
		}
		if in.Max == 0 {
			in.Max = 20
		}
		if in.Max < 1 || in.Max > MaxPeek {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: fmt.Sprintf(`"max" is 1 to %d`, MaxPeek)})
		}
		if err := badLane(in.Lane); err != nil {
			return problem(ctx, a.log, err)
		}
		list, err := lanes.PeekLane(ctx, in.Lane, in.Max)
		if err != nil {
			return unavailable(err)
		}
		return jsonResponse(http.StatusOK, Peeked{Lane: in.Lane, DeadLetters: list})
	case "redrive":
		var in struct {
			ID     string `json:"id"`
			All    bool   `json:"all"`
			Lane   string `json:"lane"`
			Shapes string `json:"shapes"`
		}
		if err := optionalBody(req, &in); err != nil {
			return problem(ctx, a.log, err)
		}
		switch {
		case (in.ID == "") == !in.All:
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `give {"id": "<message id>"} or {"all": true}`})
		case len(in.ID) > 100:
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"id" is an SQS message id`})
		case in.Shapes != "" && in.Shapes != RedriveJobs && in.Shapes != RedriveAnyShape:
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"shapes" is "jobs" (job references only, the default) or "any"`})
		}
		if err := badLane(in.Lane); err != nil {
			return problem(ctx, a.log, err)
		}
		res, err := lanes.RedriveWith(ctx, sqsqueue.RedriveOpts{Lane: in.Lane, ID: in.ID, AnyShape: in.Shapes == RedriveAnyShape})
		if err != nil && res.Redriven == 0 {
			return unavailable(err)
		}
		out := RedriveAnswer{Lane: in.Lane, Redriven: res.Redriven, More: res.More}
		for _, msgSort := range slices.Sorted(maps.Keys(res.Skipped)) {
			out.Skipped = append(out.Skipped, Skipped{Sort: msgSort, Count: res.Skipped[msgSort], Why: sqsqueue.Refusal(msgSort)})
		}
		return jsonResponse(http.StatusOK, out)
	}
	return problem(ctx, a.log, &requestError{code: "method_not_allowed", detail: "use GET /v1/admin/dead-letters, POST /v1/admin/dead-letters/peek or /redrive"})
}

// optionalBody decodes a small JSON object body strictly into v; an empty
// body leaves v as it is.
func optionalBody(req events.APIGatewayV2HTTPRequest, v any) error {
	if req.Body == "" {
		return nil
	}
	body, err := jsonBody(req, 4<<10)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &requestError{code: "invalid_request", detail: decodeReason(err)}
	}
	return nil
}
