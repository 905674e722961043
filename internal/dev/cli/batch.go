package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
)

// batchView is the API's batch JSON.
type batchView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Total  int    `json:"total"`
	Counts struct {
		Pending   int `json:"pending"`
		Succeeded int `json:"succeeded"`
		Failed    int `json:"failed"`
		Cancelled int `json:"cancelled"`
	} `json:"counts"`
	CompletionJobID *string `json:"completion_job_id"`
}

// batch submits the jobs of a JSON-lines reader ({"kind", "payload"} per
// line) as one batch, with -completion and -key, and with -wait follows it
// with one progress bar.
func (c *client) batch(ctx context.Context, lines io.Reader) int {
	completion, key := c.opts.completion, c.opts.key
	var jobs []json.RawMessage
	sc := bufio.NewScanner(lines)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) {
			fmt.Fprintf(c.stderr, "ljob: line %d is not valid JSON\n", n)
			return 1
		}
		jobs = append(jobs, append(json.RawMessage(nil), line...))
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(c.stderr, "ljob: read jobs:", err)
		return 1
	}
	req := map[string]any{"jobs": jobs}
	if completion != "" {
		if !json.Valid([]byte(completion)) {
			fmt.Fprintln(c.stderr, "ljob: -completion is not valid JSON")
			return 1
		}
		req["completion"] = json.RawMessage(completion)
	}
	body, _ := json.Marshal(req)
	headers := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		headers["Idempotency-Key"] = key
	}
	status, resp, _, err := c.call(ctx, apiclient.Request{Route: deploy.RouteEnqueueBatch, Body: body, Header: headers})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusAccepted {
		return c.fail(status, resp)
	}
	var b batchView
	if err := json.Unmarshal(resp, &b); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return 1
	}
	if !c.opts.wait {
		c.printBatch(b, resp)
		return 0
	}
	if !c.jsonOut {
		fmt.Fprintf(c.stderr, "batch %s: %d jobs\n", b.ID, b.Total)
	}
	return c.watchBatch(ctx, b.ID)
}

func (c *client) getBatch(ctx context.Context, id string) (batchView, []byte, int) {
	status, resp, _, err := c.call(ctx, apiclient.Request{Route: deploy.RouteGetBatch, Params: map[string]string{"id": id}})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return batchView{}, nil, 1
	}
	if status != http.StatusOK {
		return batchView{}, nil, c.fail(status, resp)
	}
	var b batchView
	if err := json.Unmarshal(resp, &b); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return batchView{}, nil, 1
	}
	return b, resp, 0
}

// watchBatch draws one progress bar until the batch ends: 0 if it
// succeeded, 2 if it failed.
func (c *client) watchBatch(ctx context.Context, id string) int {
	tty := isTerminal(c.stderr)
	last := ""
	for {
		b, raw, code := c.getBatch(ctx, id)
		if code != 0 {
			return code
		}
		if line := batchProgress(b); line != last {
			last = line
			switch {
			case c.jsonOut:
				fmt.Fprintln(c.stdout, strings.TrimSpace(string(raw)))
			case tty:
				fmt.Fprintf(c.stderr, "\r\033[K%s", line)
			default:
				fmt.Fprintln(c.stderr, line)
			}
		}
		if b.Status != "running" {
			if !c.jsonOut {
				if tty {
					fmt.Fprintln(c.stderr)
				}
				c.printBatch(b, raw)
			}
			if b.Status != "succeeded" {
				return 2
			}
			return 0
		}
		select {
		case <-ctx.Done():
			return 1
		case <-time.After(c.interval):
		}
	}
}

func (c *client) printBatch(b batchView, raw []byte) {
	if c.jsonOut {
		fmt.Fprintln(c.stdout, strings.TrimSpace(string(raw)))
		return
	}
	fmt.Fprintf(c.stdout, "batch:     %s\nstatus:    %s\njobs:      %d (pending %d, succeeded %d, failed %d, cancelled %d)\n",
		b.ID, b.Status, b.Total, b.Counts.Pending, b.Counts.Succeeded, b.Counts.Failed, b.Counts.Cancelled)
	if b.CompletionJobID != nil {
		fmt.Fprintf(c.stdout, "completion job: %s\n", *b.CompletionJobID)
	}
}

// batchProgress renders a batch as one progress line.
func batchProgress(b batchView) string {
	succeeded, failed, cancelled := b.Counts.Succeeded, b.Counts.Failed, b.Counts.Cancelled
	done := succeeded + failed + cancelled
	const width = 30
	n := 0
	if b.Total > 0 {
		n = done * width / b.Total
	}
	return fmt.Sprintf("%-9s %s [%s%s] %d/%d (%d failed, %d cancelled)", b.Status, b.ID,
		strings.Repeat("#", n), strings.Repeat(".", width-n), done, b.Total, failed, cancelled)
}
