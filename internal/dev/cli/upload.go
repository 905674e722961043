package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
)

// maxUpload is the most ljob upload reads: the largest payload a kind may
// allow (s3objects.MaxBytes).
const maxUpload = 100 << 20

// upload is POST /v1/uploads' answer.
type upload struct {
	ID        string `json:"id"`
	PartBytes int    `json:"part_bytes"`
	Parts     []struct {
		Number int    `json:"number"`
		URL    string `json:"url"`
	} `json:"parts"`
}

// uploadView is GET /v1/uploads/{id}'s answer.
type uploadView struct {
	ID     string  `json:"id"`
	Status string  `json:"status"`
	Error  *string `json:"error"`
	JobID  string  `json:"job_id"`
}

// uploadCommand is ljob upload KIND [FILE]: it uploads FILE (or stdin) in
// parts through the links the API answers, completes the upload, waits
// for a worker to validate it, and enqueues its job with the enqueue
// flags (-wait: watches it). The links are presigned: the parts' PUTs
// carry no credentials of the CLI's.
func (c *client) uploadCommand(ctx context.Context, args []string) int {
	in := c.stdin
	if len(args) == 2 && args[1] != "-" {
		f, err := os.Open(args[1])
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob:", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	body, err := io.ReadAll(io.LimitReader(in, maxUpload+1))
	switch {
	case err != nil:
		fmt.Fprintln(c.stderr, "ljob: read the payload:", err)
		return 1
	case len(body) > maxUpload:
		fmt.Fprintf(c.stderr, "ljob: the payload is larger than the %d bytes an upload takes\n", maxUpload)
		return 1
	}
	req, ok := c.enqueueOptions()
	if !ok {
		return 1
	}
	start, _ := json.Marshal(map[string]any{"kind": args[0], "bytes": len(body)})
	status, resp, _, err := c.call(ctx, apiclient.Request{Route: deploy.RouteStartUpload, Body: start})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusCreated {
		return c.fail(status, resp)
	}
	var up upload
	if err := json.Unmarshal(resp, &up); err != nil || up.PartBytes <= 0 {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer to the upload's start")
		return 1
	}
	plain := &http.Client{Timeout: 5 * time.Minute}
	etags := make([]string, len(up.Parts))
	for i, p := range up.Parts {
		part := body[min(i*up.PartBytes, len(body)):]
		if i < len(up.Parts)-1 {
			part = part[:min(up.PartBytes, len(part))]
		}
		put, err := http.NewRequestWithContext(ctx, http.MethodPut, p.URL, bytes.NewReader(part))
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob: part", p.Number, "has a bad link")
			return 1
		}
		r, err := plain.Do(put)
		if err != nil {
			// The link is never printed: it is a credential for the part.
			fmt.Fprintf(c.stderr, "ljob: PUT part %d of %d: the request failed\n", p.Number, len(up.Parts))
			return 1
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK || r.Header.Get("ETag") == "" {
			fmt.Fprintf(c.stderr, "ljob: PUT part %d of %d: %s\n", p.Number, len(up.Parts), r.Status)
			return 1
		}
		etags[i] = r.Header.Get("ETag")
		if !c.jsonOut {
			fmt.Fprintf(c.stderr, "uploaded part %d of %d (%d bytes)\n", p.Number, len(up.Parts), len(part))
		}
	}
	done, _ := json.Marshal(map[string][]string{"etags": etags})
	params := map[string]string{"id": up.ID}
	status, resp, _, err = c.call(ctx, apiclient.Request{Route: deploy.RouteCompleteUpload, Params: params, Body: done})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusAccepted {
		return c.fail(status, resp)
	}
	for {
		var v uploadView
		if err := json.Unmarshal(resp, &v); err != nil {
			fmt.Fprintln(c.stderr, "ljob: unexpected answer about the upload")
			return 1
		}
		switch v.Status {
		case "ready":
			if !c.jsonOut {
				fmt.Fprintf(c.stderr, "upload %s validated\n", up.ID)
			}
			req["kind"], req["upload"] = args[0], up.ID
			return c.submit(ctx, apiclient.Request{Route: deploy.RouteEnqueue}, req)
		case "failed":
			code := "failed"
			if v.Error != nil {
				code = *v.Error
			}
			fmt.Fprintf(c.stderr, "ljob: upload %s failed: %s\n", up.ID, code)
			return 1
		}
		select {
		case <-ctx.Done():
			return 1
		case <-time.After(c.interval):
		}
		status, resp, _, err = c.call(ctx, apiclient.Request{Route: deploy.RouteGetUpload, Params: params})
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob:", err)
			return 1
		}
		if status != http.StatusOK {
			return c.fail(status, resp)
		}
	}
}
