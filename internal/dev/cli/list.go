package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
)

// list prints the caller's jobs, newest first (GET /v1/jobs), with
// -status, -kind, -tag and -limit, following the pages with -all.
func (c *client) list(ctx context.Context) int {
	status, kind, limit, all := c.opts.status, c.opts.kind, c.opts.limit, c.opts.all
	tag, ok := c.filterTag()
	if !ok {
		return 1
	}
	q := url.Values{}
	if tag != "" {
		q.Set("tag", tag)
	}
	if status != "" {
		q.Set("status", status)
	}
	if kind != "" {
		q.Set("kind", kind)
	}
	q.Set("limit", strconv.Itoa(limit))
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	if !c.jsonOut {
		fmt.Fprintln(tw, "id\tkind\tstatus\terror\tattempt\tcreated\t")
	}
	n := 0
	for {
		status, body, _, err := c.call(ctx, apiclient.Request{Route: deploy.RouteListJobs, Query: q})
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob:", err)
			return 1
		}
		if status != http.StatusOK {
			return c.fail(status, body)
		}
		if c.jsonOut {
			fmt.Fprintln(c.stdout, string(body))
		}
		var page struct {
			Jobs          []Job   `json:"jobs"`
			NextPageToken *string `json:"next_page_token"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
			return 1
		}
		for _, j := range page.Jobs {
			n++
			if c.jsonOut {
				continue
			}
			e := "-"
			if j.Error != nil {
				e = *j.Error
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t\n", j.ID, j.Kind, j.Status, e, j.Attempt, j.CreatedAt.Format(time.RFC3339))
		}
		if page.NextPageToken == nil || !all {
			if !c.jsonOut && page.NextPageToken != nil {
				defer fmt.Fprintln(c.stdout, "(more: -all follows every page)")
			}
			break
		}
		q.Set("page_token", *page.NextPageToken)
	}
	if c.jsonOut {
		return 0
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	if n == 0 {
		switch status {
		case "queued", "running":
			fmt.Fprintf(c.stdout, "(nothing %s)\n", status)
		case "":
			fmt.Fprintln(c.stdout, "(no job)")
		default:
			fmt.Fprintf(c.stdout, "(no %s job)\n", status)
		}
	}
	return 0
}

// retry queues a failed or cancelled job again (POST /v1/jobs/{id}/retry).
func (c *client) retry(ctx context.Context, id string) int {
	status, resp, _, err := c.call(ctx, apiclient.Request{Route: deploy.RouteRetryJob, Params: map[string]string{"id": id}})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusOK {
		return c.fail(status, resp)
	}
	if c.opts.wait {
		return c.watch(ctx, id)
	}
	var j Job
	if err := json.Unmarshal(resp, &j); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return 1
	}
	c.print(j, resp)
	return 0
}
