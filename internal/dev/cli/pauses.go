package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
)

// pauseInfo is a pause as the API lists it.
type pauseInfo struct {
	ID       string    `json:"id"`
	Schedule string    `json:"schedule"`
	Kind     string    `json:"kind"`
	Lane     string    `json:"lane"`
	OwnerKey string    `json:"owner_key"`
	Since    time.Time `json:"since"`
	Until    time.Time `json:"until"`
	By       string    `json:"by"`
}

// pauseTarget is the body naming what ljob pause or resume TARGET acts on:
// a kind, or "lane:NAME"; with -operator, -owner narrows a kind to one
// owner's jobs (set explicitly: its default is drop's).
func (c *client) pauseTarget(target string) map[string]any {
	body := map[string]any{}
	if lane, ok := strings.CutPrefix(target, "lane:"); ok {
		body["lane"] = lane
	} else {
		body["kind"] = target
	}
	if c.opts.operator && c.opts.ownerSet {
		body["owner"] = c.opts.owner
	}
	return body
}

// scheduleAction is ljob pause, resume or run-now of a schedule: the
// caller's runtime schedule, or with -operator a declared one (or with
// -owner that owner's).
func (c *client) scheduleAction(ctx context.Context, name, action string, want int) (int, []byte, bool) {
	route := deploy.RouteScheduleAction
	body := map[string]any{}
	if c.opts.operator {
		route = deploy.RouteAdminScheduleAction
		if c.opts.ownerSet {
			body["owner"] = c.opts.owner
		}
	}
	if action == "pause" && c.opts.pauseFor > 0 {
		body["for"] = int64(c.opts.pauseFor / time.Second)
	}
	req := apiclient.Request{Route: route, Params: map[string]string{"name": name, "action": action}, Body: body}
	if c.opts.key != "" {
		req.Header = map[string]string{"Idempotency-Key": c.opts.key}
	}
	status, resp, _, err := c.call(ctx, req)
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1, nil, false
	}
	if status != want {
		return c.fail(status, resp), nil, false
	}
	return 0, resp, true
}

// runNowCommand is ljob run-now SCHEDULE: one job of the schedule now
// (-key: the same job for the same key).
func (c *client) runNowCommand(ctx context.Context, args []string) int {
	code, resp, ok := c.scheduleAction(ctx, args[0], "run", http.StatusAccepted)
	if !ok {
		return code
	}
	var j Job
	if err := json.Unmarshal(resp, &j); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return 1
	}
	if c.opts.wait && !j.final() {
		return c.watch(ctx, j.ID)
	}
	c.print(j, resp)
	return 0
}

// pauseCommand is ljob pause TARGET: yours, or with -operator anyone's.
func (c *client) pauseCommand(ctx context.Context, args []string) int {
	if name, ok := strings.CutPrefix(args[0], "schedule:"); ok {
		code, resp, ok := c.scheduleAction(ctx, name, "pause", http.StatusCreated)
		if ok {
			c.printPause(resp)
		}
		return code
	}
	body := c.pauseTarget(args[0])
	if c.opts.pauseFor > 0 {
		body["for"] = int64(c.opts.pauseFor / time.Second)
	}
	route := deploy.RoutePause
	if c.opts.operator {
		route = deploy.RouteAdminPause
	}
	status, resp, _, err := c.call(ctx, apiclient.Request{Route: route, Body: body})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusCreated {
		return c.fail(status, resp)
	}
	return c.printPause(resp)
}

// printPause prints the pause the API answered with.
func (c *client) printPause(resp []byte) int {
	var p pauseInfo
	if err := json.Unmarshal(resp, &p); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return 1
	}
	if c.jsonOut {
		fmt.Fprintln(c.stdout, strings.TrimSpace(string(resp)))
		return 0
	}
	what := "jobs already running run on; the others start within their current delay of a resume (15 minutes at most)"
	if p.Schedule != "" {
		what = "its fires make no job"
	}
	fmt.Fprintf(c.stdout, "paused %s until %s (%s)\n", p.ID, p.Until.Format(time.RFC3339), what)
	return 0
}

// resumeCommand is ljob resume TARGET.
func (c *client) resumeCommand(ctx context.Context, args []string) int {
	if name, ok := strings.CutPrefix(args[0], "schedule:"); ok {
		code, _, ok := c.scheduleAction(ctx, name, "resume", http.StatusNoContent)
		if ok && !c.jsonOut {
			fmt.Fprintf(c.stdout, "resumed %s\n", args[0])
		}
		return code
	}
	route := deploy.RouteResume
	if c.opts.operator {
		route = deploy.RouteAdminResume
	}
	status, resp, _, err := c.call(ctx, apiclient.Request{Route: route, Body: c.pauseTarget(args[0])})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusNoContent {
		return c.fail(status, resp)
	}
	if !c.jsonOut {
		fmt.Fprintf(c.stdout, "resumed %s\n", args[0])
	}
	return 0
}

// pausesCommand is ljob pauses: those that hold your jobs, or with
// -operator every one.
func (c *client) pausesCommand(ctx context.Context, _ []string) int {
	route := deploy.RouteListPauses
	if c.opts.operator {
		route = deploy.RouteAdminListPauses
	}
	var out struct {
		Pauses []pauseInfo `json:"pauses"`
	}
	if !c.getJSON(ctx, route, &out) {
		return 1
	}
	if c.jsonOut {
		return 0
	}
	if len(out.Pauses) == 0 {
		fmt.Fprintln(c.stdout, "(no pause in force)")
		return 0
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "pause\tby\tsince\tuntil")
	for _, p := range out.Pauses {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.ID, p.By, p.Since.Format(time.RFC3339), p.Until.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}
