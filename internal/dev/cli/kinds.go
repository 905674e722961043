package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
)

// kindInfo is a kind as GET /v1/kinds shows it.
type kindInfo struct {
	Name              string  `json:"name"`
	Lane              string  `json:"lane"`
	Concurrency       int     `json:"concurrency"`
	ConcurrencyPerKey int     `json:"concurrency_per_key"`
	RateLimit         int     `json:"rate_limit"`
	RateLimitPerKey   int     `json:"rate_limit_per_key"`
	RatePeriod        float64 `json:"rate_period_seconds"`
	LimitKey          string  `json:"limit_key"`
	MaxQueued         int     `json:"max_queued"`
	MaxQueuedPerOwner int     `json:"max_queued_per_owner"`
}

// getJSON GETs the route (an id of the table) and decodes the answer into out; it prints the body
// with -json, and the problem when there is one. ok is false when it
// printed why it has nothing.
func (c *client) getJSON(ctx context.Context, route string, out any) bool {
	status, body, _, err := c.call(ctx, apiclient.Request{Route: route})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return false
	}
	if status != http.StatusOK {
		c.fail(status, body)
		return false
	}
	if err := json.Unmarshal(body, out); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return false
	}
	if c.jsonOut {
		fmt.Fprintln(c.stdout, string(body))
	}
	return true
}

// kinds prints the deployment's kinds with their lanes, limits and caps
// (GET /v1/kinds); "-" is none.
func (c *client) kinds(ctx context.Context) int {
	var out struct {
		Kinds []kindInfo `json:"kinds"`
	}
	if !c.getJSON(ctx, deploy.RouteListKinds, &out) {
		return 1
	}
	if c.jsonOut {
		return 0
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tlane\tconcurrency\tper key\trate\trate per key\tkey\tmax queued\tper owner\t")
	n := func(v int) string {
		if v == 0 {
			return "-"
		}
		return strconv.Itoa(v)
	}
	rate := func(v int, period float64) string {
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%d/%gs", v, period)
	}
	for _, k := range out.Kinds {
		lane, key := k.Lane, k.LimitKey
		if lane == "" {
			lane = "default"
		}
		if key == "" {
			key = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k.Name, lane, n(k.Concurrency), n(k.ConcurrencyPerKey),
			rate(k.RateLimit, k.RatePeriod), rate(k.RateLimitPerKey, k.RatePeriod), key, n(k.MaxQueued), n(k.MaxQueuedPerOwner))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	return 0
}

// counts prints the caller's queued, waiting and running jobs now, by
// kind (GET /v1/counts).
func (c *client) counts(ctx context.Context) int {
	var out struct {
		Kinds map[string]struct {
			Queued  int `json:"queued"`
			Running int `json:"running"`
			Waiting int `json:"waiting"`
		} `json:"kinds"`
		Truncated bool `json:"truncated"`
	}
	if !c.getJSON(ctx, deploy.RouteCounts, &out) {
		return 1
	}
	if c.jsonOut {
		return 0
	}
	names := make([]string, 0, len(out.Kinds))
	for k := range out.Kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tqueued\tof which waiting\trunning\t")
	for _, k := range names {
		v := out.Kinds[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", k, v.Queued, v.Waiting, v.Running)
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	switch {
	case len(names) == 0:
		fmt.Fprintln(c.stdout, "(nothing queued or running)")
	case out.Truncated:
		fmt.Fprintln(c.stdout, "(the first 10,000 counted)")
	}
	return 0
}
