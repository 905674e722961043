package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"text/tabwriter"

	"github.com/lambdajobs/lambdajobs/internal/metricnames"
)

// statsPath is the local stack's metrics endpoint (localstack.StatsPath).
const statsPath = "/local/stats"

type kindStats struct {
	PerMinute float64            `json:"ended_per_minute"`
	Counts    map[string]float64 `json:"counts"`
	Durations map[string]struct {
		N   int     `json:"n"`
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
	} `json:"durations_ms"`
}

// local reads one of the local stack's own endpoints (what names it in
// messages); elsewhere reports where a deployed environment has the same.
// ok is false when it printed why it has nothing (or -json printed it).
func (c *client) local(ctx context.Context, what, path, elsewhere string) ([]byte, bool) {
	code, body, err := c.do(ctx, path)
	switch {
	case err != nil:
		fmt.Fprintln(c.stderr, "ljob:", err)
		return nil, false
	case code == http.StatusNotFound || code == http.StatusForbidden:
		fmt.Fprintf(c.stderr, "ljob: %s come from the local stack (make run); %s\n", what, elsewhere)
		return nil, false
	case code != http.StatusOK:
		fmt.Fprintf(c.stderr, "ljob: %s: %d %s\n", what, code, body)
		return nil, false
	}
	return body, true
}

// stats prints the metrics the local stack's functions wrote, per kind. A
// deployed environment has them on its CloudWatch dashboard instead.
func (c *client) stats(ctx context.Context) int {
	body, ok := c.local(ctx, "stats", statsPath, "a deployed environment shows them on its CloudWatch dashboard lambdajobs-<env>")
	if !ok {
		return 1
	}
	if c.jsonOut {
		fmt.Fprintln(c.stdout, string(body))
		return 0
	}
	var out struct {
		Kinds map[string]kindStats `json:"kinds"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		fmt.Fprintln(c.stderr, "ljob: stats:", err)
		return 1
	}
	kinds := make([]string, 0, len(out.Kinds))
	for k := range out.Kinds {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tenqueued\tstarted\tsucceeded\tfailed\tretried\ttimed out\tinterrupted\tcancelled\twaited\twoken\trefused\tended/min (5 min)\trun p50/p99 ms\tqueue p50/p99 ms\t")
	for _, k := range kinds {
		s := out.Kinds[k]
		n := func(name string) string { return fmt.Sprint(s.Counts[name]) }
		d := func(name string) string {
			v, ok := s.Durations[name]
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%.0f/%.0f", v.P50, v.P99)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t%s\t\n", k, n(metricnames.JobsEnqueued), n(metricnames.JobsStarted), n(metricnames.JobsSucceeded),
			n(metricnames.JobsFailed), n(metricnames.JobsRetried), n(metricnames.JobsTimedOut), n(metricnames.JobsInterrupted), n(metricnames.JobsCancelled),
			n(metricnames.JobsWaited), n(metricnames.JobsWoken), n(metricnames.JobsRefused), s.PerMinute, d(metricnames.RunDuration), d(metricnames.QueueLatency))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	if len(kinds) == 0 {
		fmt.Fprintln(c.stdout, "(no job has run yet)")
	}
	return 0
}
