// Command ljob-mcp serves a deployment's jobs API to AI agents over the
// Model Context Protocol (internal/devtools/mcpserver), over stdio, or
// over streamable HTTP with http ADDR (on this machine only: a request for
// another Host gets 421, a cross-site one 403). It takes ljob's flags for
// the API (-api or LJOB_API, -caller, -sigv4, -region); ljob mcp runs it.
//
//	ljob-mcp                                  # stdio, the local stack's API
//	ljob-mcp http 127.0.0.1:8090              # streamable HTTP at /mcp
//	ljob-mcp -api https://ID.execute-api.eu-west-1.amazonaws.com
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/lambdajobs/lambdajobs/internal/dev/cli"
	"github.com/lambdajobs/lambdajobs/internal/devtools/mcpserver"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := mcpserver.Main(ctx, os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
