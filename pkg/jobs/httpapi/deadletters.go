package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// DeadLettersPath is the operators' dead-letter queue: GET it for the
// queues' depths (nothing changes), POST DeadLettersPath+"/peek" to see up
// to {"max": n} messages by their shape, POST DeadLettersPath+"/redrive"
// with {"id": "..."} or {"all": true} to send messages back to the queue.
// Served by a function that is one of the queue's known senders, so no
// person needs sqs:SendMessage on the queue.
const DeadLettersPath = AdminPath + "/dead-letters"

// DeadLetters is what the dead-letter routes need: sqsqueue.DeadLetters.
type DeadLetters interface {
	Depths(ctx context.Context) (sqsqueue.Depths, error)
	Peek(ctx context.Context, max int) ([]sqsqueue.DeadLetter, error)
	Redrive(ctx context.Context, id string) error
	RedriveAll(ctx context.Context) (int, error)
}

// WithDeadLetters serves the dead-letter routes over d (404 without it).
func (a *API) WithDeadLetters(d DeadLetters) *API {
	a.deadLetters = d
	return a
}

// MaxPeek is the most dead letters one peek shows.
const MaxPeek = 50

// Peeked is the answer of a peek.
type Peeked struct {
	DeadLetters []sqsqueue.DeadLetter `json:"dead_letters"`
}

// Redriven is the answer of a redrive: how many messages went back, and
// whether more may be left (a redrive of all moves at most
// sqsqueue.MaxRedrive per request).
type Redriven struct {
	Redriven int  `json:"redriven"`
	More     bool `json:"more"`
}

var errNoDeadLetters = &requestError{code: "not_found", detail: "this deployment serves no dead-letter routes"}

// deadLetterRoute serves the dead-letter routes for an operator (admin has
// checked the caller).
func (a *API) deadLetterRoute(ctx context.Context, req events.APIGatewayV2HTTPRequest, method, path string) events.APIGatewayV2HTTPResponse {
	if a.deadLetters == nil {
		return problem(ctx, a.log, errNoDeadLetters)
	}
	unavailable := func(err error) events.APIGatewayV2HTTPResponse {
		if errors.Is(err, sqsqueue.ErrNoSuchDeadLetter) {
			return problem(ctx, a.log, err)
		}
		return problem(ctx, a.log, fmt.Errorf("%w: %w", jobs.ErrUnavailable, err))
	}
	switch {
	case path == DeadLettersPath && method == http.MethodGet:
		d, err := a.deadLetters.Depths(ctx)
		if err != nil {
			return unavailable(err)
		}
		return jsonResponse(http.StatusOK, d)
	case path == DeadLettersPath+"/peek" && method == http.MethodPost:
		var in struct {
			Max int `json:"max"`
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
		list, err := a.deadLetters.Peek(ctx, in.Max)
		if err != nil {
			return unavailable(err)
		}
		return jsonResponse(http.StatusOK, Peeked{DeadLetters: list})
	case path == DeadLettersPath+"/redrive" && method == http.MethodPost:
		var in struct {
			ID  string `json:"id"`
			All bool   `json:"all"`
		}
		if err := optionalBody(req, &in); err != nil {
			return problem(ctx, a.log, err)
		}
		switch {
		case (in.ID == "") == !in.All:
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `give {"id": "<message id>"} or {"all": true}`})
		case in.All:
			n, err := a.deadLetters.RedriveAll(ctx)
			if err != nil && n == 0 {
				return unavailable(err)
			}
			return jsonResponse(http.StatusOK, Redriven{Redriven: n, More: n == sqsqueue.MaxRedrive || err != nil})
		}
		if len(in.ID) > 100 {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"id" is an SQS message id`})
		}
		if err := a.deadLetters.Redrive(ctx, in.ID); err != nil {
			return unavailable(err)
		}
		return jsonResponse(http.StatusOK, Redriven{Redriven: 1})
	}
	return problem(ctx, a.log, &requestError{code: "method_not_allowed", detail: "use GET " + DeadLettersPath + ", POST " + DeadLettersPath + "/peek or /redrive"})
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
