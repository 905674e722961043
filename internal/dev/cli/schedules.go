package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"
)

// schedulesPath is the local stack's schedule list (localstack.SchedulesPath).
const schedulesPath = "/local/schedules"

// schedules prints the declared schedules and their next fire times, as
// the local stack fires them. A deployed environment's are in EventBridge
// Scheduler (group lambdajobs-<env>).
func (c *client) schedules(ctx context.Context) int {
	body, ok := c.local(ctx, "schedules", schedulesPath, "a deployed environment's are in EventBridge Scheduler: aws scheduler list-schedules --group-name lambdajobs-<env>")
	if !ok {
		return 1
	}
	if c.jsonOut {
		fmt.Fprintln(c.stdout, string(body))
		return 0
	}
	var out struct {
		Schedules []struct {
			Name       string    `json:"name"`
			Expression string    `json:"expression"`
			TimeZone   string    `json:"time_zone"`
			Kind       string    `json:"kind"`
			Overlap    string    `json:"overlap"`
			Owner      string    `json:"owner"`
			NextFire   time.Time `json:"next_fire"`
			Group      string    `json:"group"`
			LastJobID  string    `json:"last_job_id"`
		} `json:"schedules"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		fmt.Fprintln(c.stderr, "ljob: schedules:", err)
		return 1
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "schedule\tgroup\texpression\ttime zone\tkind\toverlap\tnext fire (UTC)\tlast fire's job\t")
	dash := func(v string) string {
		if v == "" {
			return "-"
		}
		return v
	}
	for _, s := range out.Schedules {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Name, dash(s.Group), s.Expression, s.TimeZone, dash(s.Kind), dash(s.Overlap),
			s.NextFire.UTC().Format(time.DateTime), dash(s.LastJobID))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	if len(out.Schedules) == 0 {
		fmt.Fprintln(c.stdout, "(no schedule is declared)")
	}
	return 0
}
