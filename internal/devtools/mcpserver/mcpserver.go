// Package mcpserver serves a deployment's jobs API to AI agents over the
// Model Context Protocol, with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk). It is a client of the HTTP
// API like ljob, with the caller's identity (the local caller, or SigV4
// for a deployed API: internal/dev/cli.APIClient), so an agent can do
// nothing its caller cannot. Its tools:
//
//   - one per enqueueable kind (GET /v1/kinds; internal kinds are not
//     there), named enqueue_ and the kind (each character but letters,
//     digits, '.', '-' and '_' as '_'), whose arguments are the job's payload, with
//     the kind's payload schema as the tool's input schema;
//   - get_job, list_jobs, count_jobs, cancel_job, retry_job and
//     signal_job.
//
// Every tool answers with the API's own JSON (a job's view, a page of
// jobs, the counts), which carries no jobs:"secret" field's value; an
// answer of the API that is a problem is a tool error with its status,
// title and detail. The kinds are read once, when the server is made.
// cmd/ljob-mcp runs it over stdio or streamable HTTP.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// kind is a kind as GET /v1/kinds shows it, as far as the tools use it.
type kind struct {
	Name          string          `json:"name"`
	Lane          string          `json:"lane"`
	FailureCodes  []string        `json:"failure_codes"`
	PayloadSchema json.RawMessage `json:"payload_schema"`
}

// New returns a server with the tools of the deployment api calls, its
// kinds read from it now.
func New(ctx context.Context, api *apiclient.Client, version string) (*mcp.Server, error) {
	var kinds struct {
		Kinds []kind `json:"kinds"`
	}
	if _, err := api.Call(ctx, apiclient.Request{Route: deploy.RouteListKinds}, &kinds); err != nil {
		return nil, fmt.Errorf("read the kinds: %w", err)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "lambdajobs", Version: version}, &mcp.ServerOptions{
		Instructions: "Background jobs of one lambdajobs deployment, as its caller: enqueue a job with the tool of its kind " +
			"(its arguments are the job's payload), then follow it with wait_job (which answers at its next change) until its status is succeeded, failed or cancelled.",
	})
	sort.Slice(kinds.Kinds, func(i, j int) bool { return kinds.Kinds[i].Name < kinds.Kinds[j].Name })
	named := map[string]string{}
	for _, k := range kinds.Kinds {
		tool, err := enqueueTool(k)
		if err != nil {
			return nil, err
		}
		if other, ok := named[tool.Name]; ok || len(tool.Name) > 128 {
			return nil, fmt.Errorf("kind %s: its tool's name %s is another kind's (%s) or longer than 128 characters", k.Name, tool.Name, other)
		}
		named[tool.Name] = k.Name
		s.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			payload := req.Params.Arguments
			if len(payload) == 0 {
				payload = json.RawMessage(`{}`)
			}
			if wrapped(k) {
				var args struct {
					Payload json.RawMessage `json:"payload"`
				}
				if err := json.Unmarshal(payload, &args); err != nil {
					return failure(err), nil
				}
				payload = args.Payload
			}
			return answer(api.Send(ctx, apiclient.Request{Route: deploy.RouteEnqueue,
				Body: map[string]any{"kind": k.Name, "payload": payload}}))
		})
	}
	addTool(s, "get_job", "A job of the caller's: its status, its result or partial result, its failure code, what it waits for, and its steps.",
		func(ctx context.Context, in jobRef) (*apiclient.Response, error) {
			return api.Send(ctx, apiclient.Request{Route: deploy.RouteGetJob, Params: map[string]string{"id": in.ID}})
		})
	addTool(s, "wait_job", "Wait for a job of the caller's to change (its status, result or partial result, failure code, or what it waits for) "+
		"and answer it as it then is: at once when it has ended, else at its next change or after seconds (1 to 20; 20 when left out). "+
		"Call it again to follow a job to its end without polling get_job.",
		func(ctx context.Context, in waitArgs) (*apiclient.Response, error) {
			params := map[string]string{"id": in.ID}
			read, err := api.Send(ctx, apiclient.Request{Route: deploy.RouteGetJob, Params: params})
			if err != nil || read.Status != http.StatusOK || ended(read.Body) {
				return read, err
			}
			seconds := in.Seconds
			if seconds == 0 {
				seconds = int(jobs.MaxWait / time.Second)
			}
			waited, err := api.Send(ctx, apiclient.Request{Route: deploy.RouteWaitJob, Params: params,
				Query: url.Values{"timeout": {strconv.Itoa(seconds)}}, Header: map[string]string{"If-None-Match": read.Header.Get("ETag")}})
			if err != nil || waited.Status == http.StatusTooManyRequests || waited.Status >= 500 {
				// The wait was refused (too many open, or every wait
				// instance busy): the job as read.
				return read, nil
			}
			return waited, nil
		})
	addTool(s, "list_jobs", "The caller's jobs, newest first, one page at a time; filter by status and kind.",
		func(ctx context.Context, in listArgs) (*apiclient.Response, error) {
			q := url.Values{}
			for k, v := range map[string]string{"status": in.Status, "kind": in.Kind, "page_token": in.PageToken} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if in.Limit > 0 {
				q.Set("limit", strconv.Itoa(in.Limit))
			}
			return api.Send(ctx, apiclient.Request{Route: deploy.RouteListJobs, Query: q})
		})
	addTool(s, "count_jobs", "How many of the caller's jobs are queued and running now, by kind.",
		func(ctx context.Context, _ struct{}) (*apiclient.Response, error) {
			return api.Send(ctx, apiclient.Request{Route: deploy.RouteCounts})
		})
	addTool(s, "cancel_job", "Cancel a job of the caller's: a queued one at once; a running one's handler is asked to stop.",
		func(ctx context.Context, in jobRef) (*apiclient.Response, error) {
			return api.Send(ctx, apiclient.Request{Route: deploy.RouteCancelJob, Params: map[string]string{"id": in.ID}})
		})
	addTool(s, "retry_job", "Run a failed or cancelled job of the caller's again, keeping its id.",
		func(ctx context.Context, in jobRef) (*apiclient.Response, error) {
			return api.Send(ctx, apiclient.Request{Route: deploy.RouteRetryJob, Params: map[string]string{"id": in.ID}})
		})
	addTool(s, "signal_job", "Send a job of the caller's the signal it waits for (a named approval, say), with its payload.",
		func(ctx context.Context, in signalArgs) (*apiclient.Response, error) {
			body, err := json.Marshal(in.Payload)
			if err != nil {
				return nil, err
			}
			return api.Send(ctx, apiclient.Request{Route: deploy.RouteSignalJob, Params: map[string]string{"id": in.ID, "name": in.Name}, Body: json.RawMessage(body)})
		})
	return s, nil
}

type jobRef struct {
	ID string `json:"id" jsonschema:"the job's id"`
}

type waitArgs struct {
	ID      string `json:"id" jsonschema:"the job's id"`
	Seconds int    `json:"seconds,omitempty" jsonschema:"how long to wait at most: 1 to 20 (20 when left out)"`
}

// ended reports whether a job's JSON shows it ended.
func ended(job []byte) bool {
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(job, &v)
	return v.Status == "succeeded" || v.Status == "failed" || v.Status == "cancelled"
}

type listArgs struct {
	Status    string `json:"status,omitempty" jsonschema:"only jobs with this status: queued, running, succeeded, failed or cancelled"`
	Kind      string `json:"kind,omitempty" jsonschema:"only jobs of this kind"`
	Limit     int    `json:"limit,omitempty" jsonschema:"at most this many (1 to 100; 20 when left out)"`
	PageToken string `json:"page_token,omitempty" jsonschema:"the next_page_token of the page before"`
}

type signalArgs struct {
	ID      string `json:"id" jsonschema:"the job's id"`
	Name    string `json:"name" jsonschema:"the signal's name, as the job's waiting_on and signal show it"`
	Payload any    `json:"payload,omitempty" jsonschema:"the signal's payload, as the job's kind declares it"`
}

// addTool adds the tool name, whose arguments decode into In, answered
// with what call gets from the API.
func addTool[In any](s *mcp.Server, name, description string, call func(context.Context, In) (*apiclient.Response, error)) {
	hints := &mcp.ToolAnnotations{ReadOnlyHint: strings.HasPrefix(name, "get_") || strings.HasPrefix(name, "list_") || strings.HasPrefix(name, "count_") || strings.HasPrefix(name, "wait_")}
	if name == "cancel_job" {
		yes := true
		hints.DestructiveHint = &yes
	}
	mcp.AddTool(s, &mcp.Tool{Name: name, Description: description, Annotations: hints},
		func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
			res, err := answer(call(ctx, in))
			return res, nil, err
		})
}

// enqueueTool is the tool that enqueues jobs of k.
func enqueueTool(k kind) (*mcp.Tool, error) {
	desc := fmt.Sprintf("Enqueue a job of kind %s for the caller: the arguments are its payload. It answers the job (202: queued), "+
		"whose id get_job follows to its end.", k.Name)
	if len(k.FailureCodes) > 0 {
		desc += " It can fail with the codes " + strings.Join(k.FailureCodes, ", ") + "."
	}
	schema := k.PayloadSchema
	if wrapped(k) {
		// The input of a tool is an object: a payload of another type is
		// its one property (its schema without its $schema, which names
		// the draft at the root only).
		inner := map[string]any{}
		if json.Unmarshal(schema, &inner) != nil || inner == nil {
			inner = map[string]any{} // none, or true: any payload
		}
		delete(inner, "$schema")
		raw, err := json.Marshal(map[string]any{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
			"properties": map[string]any{"payload": inner}, "required": []string{"payload"}})
		if err != nil {
			return nil, err
		}
		schema = raw
	}
	return &mcp.Tool{Name: ToolName(k.Name), Description: desc, InputSchema: schema}, nil
}

// ToolName is the name of the tool that enqueues jobs of kind: enqueue_
// and the kind, each character but letters, digits, '.', '-' and '_' as
// '_' (the characters MCP allows in a tool's name).
func ToolName(kind string) string {
	return "enqueue_" + strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, kind)
}

// wrapped reports whether k's payload is not an object, so that its
// tool's input holds it as "payload".
func wrapped(k kind) bool {
	var s struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(k.PayloadSchema, &s) != nil || s.Type != "object"
}

// answer is the tool's result for the API's answer: its JSON, or, for a
// problem, a tool error saying what the API said (never the request).
func answer(resp *apiclient.Response, err error) (*mcp.CallToolResult, error) {
	if err != nil {
		return failure(err), nil
	}
	if resp.Status >= 300 {
		return failure(apiclient.ProblemOf(resp)), nil
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(resp.Body)}}}
	var structured map[string]any
	if json.Unmarshal(resp.Body, &structured) == nil {
		res.StructuredContent = structured
	}
	return res, nil
}

// failure is a tool error saying err.
func failure(err error) *mcp.CallToolResult {
	var p *apiclient.Problem
	msg := err.Error()
	if errors.As(err, &p) {
		msg = p.Error()
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
