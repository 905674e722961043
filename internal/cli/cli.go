// Package cli is the ljob command: enqueue a job, get it, and watch it with
// a progress bar until it ends, against the local stack or a deployed API.
package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// DefaultAPI is the local stack's address.
const DefaultAPI = "http://127.0.0.1:8080"

const usage = `ljob: enqueue and watch lambdajobs jobs.

Usage:
  ljob [flags] enqueue KIND [PAYLOAD]   enqueue a job (PAYLOAD is JSON, "-" or absent: read stdin)
  ljob [flags] get ID                   show a job
  ljob [flags] watch ID                 follow a job until it ends, with a progress bar
  ljob [flags] cancel ID                cancel a job (a running one stops at its next check)
  ljob [flags] list                     your jobs, newest first (-status, -kind, -limit N, -all: every page)
  ljob [flags] retry ID                 queue a failed or cancelled job again (-wait: watch it)
  ljob [flags] ui                       the web dashboard over the API, on -listen (127.0.0.1:8081, loopback
                                        only), signing as the CLI does; -operator: any owner's jobs and the
                                        dead-letter queue, through the admin routes
  ljob [flags] batch [FILE]             submit the JSON lines of FILE (or stdin), {"kind", "payload"}
                                        each, as one batch; -wait follows it with one progress bar
  ljob [flags] get-batch ID             show a batch and its counts
  ljob [flags] stats                    the local stack's metrics per kind: counts by outcome,
                                        p50/p99 run duration and queue latency
  ljob [flags] schedules                the declared schedules and their next fire times (local stack)
  ljob [flags] drop [FILE]              send a raw message (an S3 notification, an EventBridge
                                        event, an envelope...) to the queue, as another AWS service
                                        would, and print the ids of the jobs it becomes

Flags:
  -api URL       the API (env LJOB_API; default http://127.0.0.1:8080, the local stack)
  -caller NAME   local caller, sent as X-Local-Caller (env LJOB_CALLER)
  -key KEY       Idempotency-Key for enqueue
  -wait          enqueue (or cancel), then watch the job until it ends
  -delay D       enqueue: run the job after D (such as 90s or 36h)
  -at TIME       enqueue: run the job at TIME (RFC 3339)
  -json          print JSON only (one object per line when watching)
  -sigv4         sign requests with SigV4 (default credential chain); on by default for *.amazonaws.com
  -region R      region for SigV4 (default: from the API host or AWS_REGION)
  -interval D    watch poll interval (default 500ms)
  -queue Q       drop: the queue's URL, or its name on -sqs-endpoint (env LJOB_QUEUE; default lambdajobs-local)
  -sqs-endpoint  drop: SQS endpoint for a queue name (env LJOB_SQS_ENDPOINT; default http://127.0.0.1:4566)
  -owner ARN     drop: the envelope route's owner, to derive keyed envelope ids (default the local caller)
  -completion J  batch: the completion job, {"kind": ..., "payload": ...}

Exit status: 0 success (or job succeeded), 1 usage or request error, 2 job failed.
`

// Main runs the command with args (without the program name) and returns
// its exit status.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("ljob", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	c := &client{stdout: stdout, stderr: stderr}
	api := fs.String("api", envOr(getenv, "LJOB_API", DefaultAPI), "")
	fs.StringVar(&c.caller, "caller", getenv("LJOB_CALLER"), "")
	key := fs.String("key", "", "")
	wait := fs.Bool("wait", false, "")
	delay := fs.Duration("delay", 0, "")
	at := fs.String("at", "", "")
	fs.BoolVar(&c.jsonOut, "json", false, "")
	sig := fs.Bool("sigv4", false, "")
	fs.StringVar(&c.region, "region", getenv("AWS_REGION"), "")
	fs.DurationVar(&c.interval, "interval", 500*time.Millisecond, "")
	queue := fs.String("queue", envOr(getenv, "LJOB_QUEUE", "lambdajobs-local"), "")
	sqsEndpoint := fs.String("sqs-endpoint", envOr(getenv, "LJOB_SQS_ENDPOINT", "http://127.0.0.1:4566"), "")
	owner := fs.String("owner", "arn:aws:iam::000000000000:user/local", "")
	completion := fs.String("completion", "", "")
	listen := fs.String("listen", "127.0.0.1:8081", "")
	operator := fs.Bool("operator", false, "")
	status := fs.String("status", "", "")
	kind := fs.String("kind", "", "")
	limit := fs.Int("limit", 20, "")
	all := fs.Bool("all", false, "")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	u, err := url.Parse(strings.TrimRight(*api, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(stderr, "ljob: -api %q is not an http(s) URL\n", *api)
		return 1
	}
	c.base = u
	c.http = &http.Client{Timeout: 30 * time.Second}
	if *sig || strings.HasSuffix(u.Hostname(), ".amazonaws.com") {
		if err := c.setupSigV4(ctx); err != nil {
			fmt.Fprintln(stderr, "ljob:", err)
			return 1
		}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return 1
	}
	switch cmd := rest[0]; {
	case cmd == "enqueue" && (len(rest) == 2 || len(rest) == 3):
		payload := "-"
		if len(rest) == 3 {
			payload = rest[2]
		}
		if payload == "-" {
			b, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
			if err != nil {
				fmt.Fprintln(stderr, "ljob: read payload:", err)
				return 1
			}
			payload = string(b)
		}
		var runAt *time.Time
		if *at != "" {
			t, err := time.Parse(time.RFC3339, *at)
			if err != nil {
				fmt.Fprintln(stderr, "ljob: -at wants an RFC 3339 time such as 2026-12-01T09:00:00Z")
				return 1
			}
			runAt = &t
		}
		return c.enqueue(ctx, rest[1], payload, *key, *wait, *delay, runAt)
	case cmd == "get" && len(rest) == 2:
		return c.get(ctx, rest[1])
	case cmd == "ui" && len(rest) == 1:
		return c.ui(ctx, *listen, *operator)
	case cmd == "list" && len(rest) == 1:
		return c.list(ctx, *status, *kind, *limit, *all)
	case cmd == "retry" && len(rest) == 2:
		return c.retry(ctx, rest[1], *wait)
	case cmd == "stats" && len(rest) == 1:
		return c.stats(ctx)
	case cmd == "schedules" && len(rest) == 1:
		return c.schedules(ctx)
	case cmd == "watch" && len(rest) == 2:
		return c.watch(ctx, rest[1])
	case cmd == "cancel" && len(rest) == 2:
		return c.cancel(ctx, rest[1], *wait)
	case cmd == "get-batch" && len(rest) == 2:
		b, raw, code := c.getBatch(ctx, rest[1])
		if code == 0 {
			c.printBatch(b, raw)
		}
		return code
	case cmd == "batch" && len(rest) <= 2:
		in := stdin
		if len(rest) == 2 && rest[1] != "-" {
			f, err := os.Open(rest[1])
			if err != nil {
				fmt.Fprintln(stderr, "ljob:", err)
				return 1
			}
			defer f.Close()
			in = f
		}
		return c.batch(ctx, in, *completion, *key, *wait)
	case cmd == "drop" && len(rest) <= 2:
		var body []byte
		if len(rest) == 2 && rest[1] != "-" {
			body, err = os.ReadFile(rest[1])
		} else {
			body, err = io.ReadAll(io.LimitReader(stdin, 1<<20))
		}
		if err != nil {
			fmt.Fprintln(stderr, "ljob:", err)
			return 1
		}
		return c.drop(ctx, *queue, *sqsEndpoint, *owner, body, *wait)
	}
	fs.Usage()
	return 1
}

func envOr(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}

type client struct {
	base     *url.URL
	http     *http.Client
	caller   string
	jsonOut  bool
	interval time.Duration
	region   string
	creds    aws.CredentialsProvider
	signer   *v4.Signer
	stdout   io.Writer
	stderr   io.Writer
}

// Job is the API's job JSON.
type Job struct {
	ID         string          `json:"id"`
	Kind       string          `json:"kind"`
	Status     string          `json:"status"`
	Result     json.RawMessage `json:"result"`
	Error      *string         `json:"error"`
	Attempt    int             `json:"attempt"`
	RunAt      *time.Time      `json:"run_at,omitempty"`
	LastError  *string         `json:"last_error,omitempty"`
	Cancel     bool            `json:"cancel_requested,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

func (j Job) final() bool {
	return j.Status == "succeeded" || j.Status == "failed" || j.Status == "cancelled"
}

type problem struct {
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	Status int    `json:"status"`
}

func (c *client) setupSigV4(ctx context.Context) error {
	if err := checkSigningTarget(c.base); err != nil {
		return err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS credentials: %w", err)
	}
	if c.region == "" {
		c.region = cfg.Region
	}
	// https://ID.execute-api.REGION.amazonaws.com
	if parts := strings.Split(c.base.Hostname(), "."); len(parts) >= 5 && parts[1] == "execute-api" {
		c.region = parts[2]
	}
	if c.region == "" {
		return errors.New("-sigv4 needs a region: pass -region or set AWS_REGION")
	}
	c.creds, c.signer = cfg.Credentials, v4.NewSigner()
	return nil
}

// checkSigningTarget refuses to send signed requests, which carry the
// caller's access key id and a signature, over plain HTTP to anything but
// this machine.
func checkSigningTarget(u *url.URL) error {
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("-sigv4 signs only over https (or to this machine): %s is plain %s", u.Host, u.Scheme)
}

func (c *client) do(ctx context.Context, method, path string, body []byte, headers map[string]string) (int, []byte, http.Header, error) {
	u := *c.base
	path, u.RawQuery, _ = strings.Cut(path, "?")
	u.Path = strings.TrimRight(u.Path, "/") + path
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.send(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b, resp.Header, err
}

// send sends one request to the API: as the local caller, or signed with
// SigV4 when the CLI signs (the dashboard of ljob ui sends through it too).
func (c *client) send(req *http.Request) (*http.Response, error) {
	if c.caller != "" {
		req.Header.Set("X-Local-Caller", c.caller)
	}
	if c.signer != nil {
		var body []byte
		if req.Body != nil {
			b, err := io.ReadAll(io.LimitReader(req.Body, 8<<20))
			if err != nil {
				return nil, err
			}
			body = b
			req.Body = io.NopCloser(bytes.NewReader(b))
		}
		creds, err := c.creds.Retrieve(req.Context())
		if err != nil {
			return nil, fmt.Errorf("AWS credentials: %w", err)
		}
		sum := sha256.Sum256(body)
		if err := c.signer.SignHTTP(req.Context(), creds, req, hex.EncodeToString(sum[:]), "execute-api", c.region, time.Now()); err != nil {
			return nil, err
		}
	}
	return c.http.Do(req)
}

func (c *client) fail(status int, body []byte) int {
	var p problem
	if json.Unmarshal(body, &p) == nil && p.Code != "" {
		if c.jsonOut {
			fmt.Fprintln(c.stdout, strings.TrimSpace(string(body)))
		}
		fmt.Fprintf(c.stderr, "ljob: %d %s (%s): %s\n", status, p.Title, p.Code, p.Detail)
		return 1
	}
	fmt.Fprintf(c.stderr, "ljob: HTTP %d: %s\n", status, strings.TrimSpace(string(body)))
	return 1
}

func (c *client) enqueue(ctx context.Context, kind, payload, key string, wait bool, delay time.Duration, runAt *time.Time) int {
	if !json.Valid([]byte(payload)) {
		fmt.Fprintln(c.stderr, "ljob: the payload is not valid JSON")
		return 1
	}
	req := map[string]any{"kind": kind, "payload": json.RawMessage(payload)}
	if delay > 0 {
		req["delay"] = int64((delay + time.Second - 1) / time.Second)
	}
	if runAt != nil {
		req["run_at"] = runAt.UTC().Format(time.RFC3339Nano)
	}
	body, _ := json.Marshal(req)
	headers := map[string]string{"Content-Type": "application/json"}
	if key != "" {
		headers["Idempotency-Key"] = key
	}
	status, resp, _, err := c.do(ctx, http.MethodPost, "/v1/jobs", body, headers)
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusAccepted {
		return c.fail(status, resp)
	}
	var j Job
	if err := json.Unmarshal(resp, &j); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return 1
	}
	if wait {
		if !c.jsonOut {
			fmt.Fprintf(c.stderr, "enqueued %s (%s)\n", j.ID, j.Kind)
		}
		return c.watch(ctx, j.ID)
	}
	c.print(j, resp)
	return 0
}

func (c *client) fetch(ctx context.Context, id string) (Job, []byte, int) {
	status, resp, _, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, nil)
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return Job{}, nil, 1
	}
	if status != http.StatusOK {
		return Job{}, nil, c.fail(status, resp)
	}
	var j Job
	if err := json.Unmarshal(resp, &j); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return Job{}, nil, 1
	}
	return j, resp, 0
}

func (c *client) get(ctx context.Context, id string) int {
	j, raw, code := c.fetch(ctx, id)
	if code != 0 {
		return code
	}
	c.print(j, raw)
	return 0
}

func (c *client) print(j Job, raw []byte) {
	if c.jsonOut {
		fmt.Fprintln(c.stdout, strings.TrimSpace(string(raw)))
		return
	}
	fmt.Fprintf(c.stdout, "id:       %s\nkind:     %s\nstatus:   %s\nattempt:  %d\ncreated:  %s\n", j.ID, j.Kind, j.Status, j.Attempt, j.CreatedAt.Format(time.RFC3339Nano))
	if j.RunAt != nil {
		fmt.Fprintf(c.stdout, "next run: %s (in %s)\n", j.RunAt.Format(time.RFC3339Nano), time.Until(*j.RunAt).Round(time.Second))
	}
	if j.LastError != nil {
		fmt.Fprintf(c.stdout, "retrying: the last attempt failed with %s\n", *j.LastError)
	}
	if j.Cancel {
		fmt.Fprintln(c.stdout, "cancel:   requested; the run is stopping")
	}
	if j.StartedAt != nil {
		fmt.Fprintf(c.stdout, "started:  %s\n", j.StartedAt.Format(time.RFC3339Nano))
	}
	if j.FinishedAt != nil {
		fmt.Fprintf(c.stdout, "finished: %s (%s)\n", j.FinishedAt.Format(time.RFC3339Nano), j.FinishedAt.Sub(j.CreatedAt).Round(time.Millisecond))
	}
	if j.Error != nil {
		fmt.Fprintf(c.stdout, "error:    %s\n", *j.Error)
	}
	fmt.Fprintf(c.stdout, "result:   %s\n", string(j.Result))
}

// watch polls the job until it is final, drawing progress from its partial
// results, and returns 0 if it succeeded, 2 if it failed.
func (c *client) watch(ctx context.Context, id string) int {
	tty := isTerminal(c.stderr)
	last := ""
	for {
		j, raw, code := c.fetch(ctx, id)
		if code != 0 {
			return code
		}
		line := string(raw)
		if line != last {
			last = line
			if c.jsonOut {
				fmt.Fprintln(c.stdout, strings.TrimSpace(line))
			} else {
				bar := Progress(j)
				if tty {
					fmt.Fprintf(c.stderr, "\r\033[K%s", bar)
				} else {
					fmt.Fprintln(c.stderr, bar)
				}
			}
		}
		if j.final() {
			if !c.jsonOut {
				if tty {
					fmt.Fprintln(c.stderr)
				}
				c.print(j, raw)
			}
			if j.Status != "succeeded" {
				return 2
			}
			return 0
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(c.stderr, "\nljob: stopped watching")
			return 1
		case <-time.After(c.interval):
		}
	}
}

func (c *client) cancel(ctx context.Context, id string, wait bool) int {
	status, resp, _, err := c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, nil)
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusOK && status != http.StatusAccepted {
		return c.fail(status, resp)
	}
	var j Job
	if err := json.Unmarshal(resp, &j); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return 1
	}
	if wait && !j.final() {
		c.watch(ctx, id)
		return 0
	}
	c.print(j, resp)
	return 0
}

// Progress renders a job's state as one line: a bar when its partial result
// has {"done", "total"} or {"percent"}, else the partial result itself.
func Progress(j Job) string {
	var p map[string]any
	_ = json.Unmarshal(j.Result, &p)
	num := func(k string) (float64, bool) {
		v, ok := p[k].(float64)
		return v, ok
	}
	frac := -1.0
	label := ""
	if done, ok := num("done"); ok {
		if total, ok := num("total"); ok && total > 0 {
			frac, label = done/total, fmt.Sprintf("%g/%g", done, total)
		}
	} else if pct, ok := num("percent"); ok {
		frac, label = pct/100, fmt.Sprintf("%g%%", pct)
	}
	head := fmt.Sprintf("%-9s %s", j.Status, j.ID)
	if j.Attempt > 1 {
		head += fmt.Sprintf(" (attempt %d)", j.Attempt)
	}
	if j.RunAt != nil && j.Status == "queued" {
		head += " next run " + j.RunAt.Format(time.RFC3339)
	}
	switch {
	case frac >= 0:
		frac = min(max(frac, 0), 1)
		const width = 30
		n := int(frac * width)
		return fmt.Sprintf("%s [%s%s] %s", head, strings.Repeat("#", n), strings.Repeat(".", width-n), label)
	case len(j.Result) > 0 && string(j.Result) != "null" && !j.final():
		r := string(j.Result)
		if len(r) > 60 {
			r = r[:60] + "..."
		}
		return head + " " + r
	}
	return head
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
