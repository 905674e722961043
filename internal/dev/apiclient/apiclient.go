// Package apiclient is the one client of the jobs API that this
// repository's own tools use: ljob (internal/dev/cli), the dashboard, the
// local stack and the bench. It builds every request from the route table
// (internal/deploy: a route's id and its path parameters, never a path
// written here or by a caller), sends it, and turns an answer of 300 or
// more into a *Problem (RFC 9457 problem+json when the API sent one).
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// CallerHeader names the local stack's caller (its gateway makes it an
// IAM principal).
const CallerHeader = "X-Local-Caller"

// maxAnswer is the most of an answer read (a page of jobs, a batch).
const maxAnswer = 8 << 20

// Client sends requests to one deployment's API.
type Client struct {
	// Base is the API's base URL; its path, if any, prefixes each route's.
	Base *url.URL
	// Do sends a request (http.DefaultClient.Do when nil): ljob signs
	// with SigV4 in its own, the bench serves the API in-process.
	Do func(*http.Request) (*http.Response, error)
	// Caller, when set, is sent as X-Local-Caller.
	Caller string
	// Attempts is how many times a request is sent when it fails on its
	// way or with a 5xx, if repeating it cannot make a second anything: a
	// GET or a DELETE, or a request with an Idempotency-Key. 0 or 1 sends
	// it once, as ljob and the dashboard do (a person retries).
	Attempts int
}

// Request is one call of a route.
type Request struct {
	// Route is the route's id in deploy.Routes (deploy.Route*).
	Route string
	// Params are its path parameters, by name ({id}, {name}, {action}).
	Params map[string]string
	Query  url.Values
	// Body is sent as JSON (Content-Type: application/json); []byte and
	// json.RawMessage are sent as they are. nil sends no body.
	Body any
	// Header holds headers to send, such as Idempotency-Key.
	Header map[string]string
}

// Response is an answer of the API.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Problem is an answer of 300 or more: the API's problem+json body
// decoded, or for another body (a gateway's own answer) its status only.
type Problem struct {
	Status int    `json:"status"`
	Type   string `json:"type"`
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	// Body is the answer as it came.
	Body []byte `json:"-"`
}

func (p *Problem) Error() string {
	if p.Code == "" {
		return fmt.Sprintf("HTTP %d: %s", p.Status, strings.TrimSpace(string(p.Body)))
	}
	return fmt.Sprintf("%d %s (%s): %s", p.Status, p.Title, p.Code, p.Detail)
}

// Message is the problem as one line for a person: its title and detail,
// or the status's text when the body said neither.
func (p *Problem) Message() string {
	msg := p.Title
	if p.Detail != "" {
		msg += ": " + p.Detail
	}
	if msg == "" {
		msg = http.StatusText(p.Status)
	}
	return msg
}

// Call sends req and decodes a JSON answer into out (nil: not decoded).
// An answer of 300 or more is returned with a *Problem error.
func (c *Client) Call(ctx context.Context, req Request, out any) (*Response, error) {
	resp, err := c.Send(ctx, req)
	if err != nil {
		return nil, err
	}
	if resp.Status >= 300 {
		return resp, ProblemOf(resp)
	}
	if out != nil && len(resp.Body) > 0 {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return resp, fmt.Errorf("apiclient: the answer of %s: %w", req.Route, err)
		}
	}
	return resp, nil
}

// ProblemOf is the problem of an answer of 300 or more.
func ProblemOf(resp *Response) *Problem {
	p := &Problem{}
	if json.Unmarshal(resp.Body, p) != nil {
		p = &Problem{}
	}
	p.Status, p.Body = resp.Status, resp.Body
	return p
}

// Send sends req and returns the answer, whatever its status. An error is
// a request the table cannot build (an unknown route, a missing
// parameter) or one that got no answer.
func (c *Client) Send(ctx context.Context, req Request) (*Response, error) {
	rt, ok := deploy.RouteByID(req.Route)
	if !ok {
		return nil, fmt.Errorf("apiclient: no route %q in the table", req.Route)
	}
	path, err := rt.PathFor(req.Params)
	if err != nil {
		return nil, fmt.Errorf("apiclient: %w", err)
	}
	var body []byte
	switch b := req.Body.(type) {
	case nil:
	case []byte:
		body = b
	case json.RawMessage:
		body = b
	default:
		if body, err = json.Marshal(b); err != nil {
			return nil, fmt.Errorf("apiclient: %s's body: %w", req.Route, err)
		}
	}
	u := *c.Base
	// Each parameter stays one segment: a "/" in an id is sent as %2F.
	u.RawPath = strings.TrimRight(c.Base.EscapedPath(), "/") + path
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, fmt.Errorf("apiclient: %w", err)
	}
	u.RawQuery = req.Query.Encode()
	attempts := 1
	if c.Attempts > 1 && (rt.Method == http.MethodGet || rt.Method == http.MethodDelete || req.Header["Idempotency-Key"] != "") {
		attempts = c.Attempts
	}
	var resp *Response
	for range attempts {
		resp, err = c.send(ctx, rt.Method, u.String(), body, req)
		if ctx.Err() != nil || (err == nil && resp.Status < 500) {
			break
		}
	}
	return resp, err
}

func (c *Client) send(ctx context.Context, method, target string, body []byte, req Request) (*Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	if c.Caller != "" {
		hr.Header.Set(CallerHeader, c.Caller)
	}
	do := c.Do
	if do == nil {
		do = http.DefaultClient.Do
	}
	resp, err := do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}
