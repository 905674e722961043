package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
)

// tagFlags are the -tag flags, each "key=value" (the API checks the key
// and value; the flag only checks the form).
type tagFlags []string

func (t *tagFlags) String() string { return strings.Join(*t, ",") }

func (t *tagFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("want key=value, such as import=42")
	}
	*t = append(*t, v)
	return nil
}

// filterTag is the one -tag of list and bulk; false, having said why, for
// more than one.
func (c *client) filterTag() (string, bool) {
	switch len(c.opts.tags) {
	case 0:
		return "", true
	case 1:
		return c.opts.tags[0], true
	}
	fmt.Fprintln(c.stderr, "ljob: list and bulk select by one -tag")
	return "", false
}

// bulkCommand is ljob bulk cancel|retry: POST /v1/bulk/{action} over the
// filter of -status, -kind and -tag, bounded to jobs created before the
// command started, following the continuation tokens to the end.
func (c *client) bulkCommand(ctx context.Context, args []string) int {
	action := args[0]
	if action != "cancel" && action != "retry" {
		fmt.Fprintf(c.stderr, "ljob: bulk %q: want cancel or retry\n", action)
		return 1
	}
	tag, ok := c.filterTag()
	if !ok {
		return 1
	}
	body := map[string]string{}
	for k, v := range map[string]string{"status": c.opts.status, "kind": c.opts.kind, "tag": tag} {
		if v != "" {
			body[k] = v
		}
	}
	if len(body) == 0 {
		fmt.Fprintln(c.stderr, "ljob: bulk needs -status, -kind or -tag: it never acts on every job")
		return 1
	}
	body["created_before"] = time.Now().UTC().Format(time.RFC3339Nano)
	matched, changed := 0, 0
	for {
		b, _ := json.Marshal(body)
		status, resp, _, err := c.call(ctx, apiclient.Request{Route: deploy.RouteBulkAction, Params: map[string]string{"action": action}, Body: b})
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob:", err)
			return 1
		}
		if status != http.StatusOK {
			if matched > 0 {
				fmt.Fprintf(c.stderr, "ljob: %d jobs matched and %d changed before this refusal\n", matched, changed)
			}
			return c.fail(status, resp)
		}
		var res httpapi.BulkResult
		if err := json.Unmarshal(resp, &res); err != nil {
			fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
			return 1
		}
		matched, changed = matched+res.Matched, changed+res.Changed
		if res.ContinuationToken == nil {
			break
		}
		body["continuation_token"] = *res.ContinuationToken
	}
	if c.jsonOut {
		fmt.Fprintf(c.stdout, "{\"matched\":%d,\"changed\":%d}\n", matched, changed)
		return 0
	}
	past := map[string]string{"cancel": "cancelled", "retry": "retried"}[action]
	fmt.Fprintf(c.stdout, "%d jobs matched, %d %s\n", matched, changed, past)
	return 0
}
