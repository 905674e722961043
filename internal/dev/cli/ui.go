package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/dashboard"
)

// ui serves the dashboard over the API until ctx ends. It listens on the
// loopback interface only: it acts with the operator's identity. An
// operator also gets the dead-letter queue, through the API's operators'
// routes (served by a known sender of the queue: no SQS permission is
// needed, and the queue's policy would deny a person's send).
func (c *client) ui(ctx context.Context) int {
	listen, operator := c.opts.listen, c.opts.operator
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		fmt.Fprintf(c.stderr, "ljob: ui listens on a loopback address only (such as 127.0.0.1:8081), not %q\n", listen)
		return 1
	}
	cfg := dashboard.Config{API: c.base, Do: c.send, Caller: c.caller, Operator: operator}
	if operator {
		cfg.DLQ = &dashboard.APIDeadLetters{API: c.base, Do: c.send, Caller: c.caller}
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	// The dashboard answers only at the address it actually listens on.
	cfg.Addr = ln.Addr().String()
	dash, err := dashboard.New(cfg)
	if err != nil {
		ln.Close()
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	srv := &http.Server{Handler: dash, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(c.stdout, "the dashboard of %s is at http://%s/ (Ctrl-C stops it)\n", c.base, ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	return 0
}
