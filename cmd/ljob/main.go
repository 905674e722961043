// Command ljob enqueues lambdajobs jobs, shows them, and watches them to
// the end with a progress bar. It talks to the local stack by default and
// to a deployed API (SigV4-signed) with -api or LJOB_API. Run `ljob` alone
// for usage.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/lambdajobs/lambdajobs/internal/dev/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
