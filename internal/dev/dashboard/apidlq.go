package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// APIDeadLetters is the DLQ through the API's operators' dead-letter
// routes (/v1/admin/dead-letters): the deployment's cancel function, one
// of the queue's known senders, reads and redrives it, so the person at the
// dashboard needs no SQS permission at all (and the queue's policy would
// deny them the send). Its caller must be one of the deployment's
// operators.
type APIDeadLetters struct {
	// API is the jobs API's base URL.
	API *url.URL
	// Do sends a request (http.DefaultClient.Do when nil); ljob ui signs
	// them.
	Do func(*http.Request) (*http.Response, error)
	// Caller names the local caller (X-Local-Caller) on the local stack.
	Caller string
}

func (d *APIDeadLetters) call(ctx context.Context, req apiclient.Request, out any) error {
	status, problem, err := callAPI(ctx, &apiclient.Client{Base: d.API, Do: d.Do, Caller: d.Caller}, req, out)
	switch {
	case err != nil:
		return err
	case status == http.StatusNotFound && strings.Contains(problem, "dead-letter queue"):
		return sqsqueue.ErrNoSuchDeadLetter
	case status >= 300:
		return fmt.Errorf("%d %s", status, problem)
	}
	return nil
}

// Depths reads the queues' depths (GET): nothing changes.
func (d *APIDeadLetters) Depths(ctx context.Context) (sqsqueue.Depths, error) {
	var out sqsqueue.Depths
	err := d.call(ctx, apiclient.Request{Route: deploy.RouteAdminDeadLetters}, &out)
	return out, err
}

// Peek shows up to max of lane's dead letters by their shape.
func (d *APIDeadLetters) Peek(ctx context.Context, lane string, max int) ([]DeadLetter, error) {
	var out httpapi.Peeked
	err := d.call(ctx, deadLetterAction("peek", peekRequest{Max: min(max, httpapi.MaxPeek), Lane: lane}), &out)
	return out.DeadLetters, err
}

// deadLetterAction is a request of POST /v1/admin/dead-letters/{action}.
func deadLetterAction(action string, body any) apiclient.Request {
	return apiclient.Request{Route: deploy.RouteAdminDeadLetterAction, Params: map[string]string{"action": action}, Body: body}
}

type peekRequest struct {
	Max  int    `json:"max"`
	Lane string `json:"lane,omitempty"`
}

type redriveRequest struct {
	ID     string `json:"id,omitempty"`
	All    bool   `json:"all,omitempty"`
	Lane   string `json:"lane,omitempty"`
	Shapes string `json:"shapes,omitempty"`
}

func shapes(anyShape bool) string {
	if anyShape {
		return httpapi.RedriveAnyShape
	}
	return ""
}

// Redrive sends one of lane's dead letters back to its queue.
func (d *APIDeadLetters) Redrive(ctx context.Context, lane, id string, anyShape bool) error {
	return d.call(ctx, deadLetterAction("redrive", redriveRequest{ID: id, Lane: lane, Shapes: shapes(anyShape)}), nil)
}

// RedriveAll sends lane's dead letters back to its queue, repeating the
// route while it reports more and moves some; what it left is the last
// request's count (which saw every message the others left).
func (d *APIDeadLetters) RedriveAll(ctx context.Context, lane string, anyShape bool) (httpapi.RedriveAnswer, error) {
	total := httpapi.RedriveAnswer{Lane: lane}
	for range 100 {
		var out httpapi.RedriveAnswer
		if err := d.call(ctx, deadLetterAction("redrive", redriveRequest{All: true, Lane: lane, Shapes: shapes(anyShape)}), &out); err != nil {
			return total, err
		}
		total.Redriven += out.Redriven
		total.Skipped, total.More = out.Skipped, out.More
		if !out.More || out.Redriven == 0 {
			break
		}
	}
	return total, nil
}
