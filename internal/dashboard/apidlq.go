package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// APIDeadLetters is the DLQ through the API's operators' dead-letter
// routes (httpapi.DeadLettersPath): the deployment's cancel function, one
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

func (d *APIDeadLetters) call(ctx context.Context, method, path string, body, out any) error {
	status, problem, err := apiClient{api: d.API, do: d.Do, caller: d.Caller}.call(ctx, method, path, body, out)
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
	err := d.call(ctx, http.MethodGet, httpapi.DeadLettersPath, nil, &out)
	return out, err
}

// Peek shows up to max dead letters by their shape.
func (d *APIDeadLetters) Peek(ctx context.Context, max int) ([]DeadLetter, error) {
	var out httpapi.Peeked
	err := d.call(ctx, http.MethodPost, httpapi.DeadLettersPath+"/peek", map[string]int{"max": min(max, httpapi.MaxPeek)}, &out)
	return out.DeadLetters, err
}

// Redrive sends one dead letter back to the queue.
func (d *APIDeadLetters) Redrive(ctx context.Context, id string) error {
	return d.call(ctx, http.MethodPost, httpapi.DeadLettersPath+"/redrive", map[string]string{"id": id}, nil)
}

// RedriveAll sends every dead letter back to the queue, repeating the
// route while it reports more.
func (d *APIDeadLetters) RedriveAll(ctx context.Context) (int, error) {
	n := 0
	for range 100 {
		var out httpapi.Redriven
		if err := d.call(ctx, http.MethodPost, httpapi.DeadLettersPath+"/redrive", map[string]bool{"all": true}, &out); err != nil {
			return n, err
		}
		n += out.Redriven
		if !out.More {
			break
		}
	}
	return n, nil
}
