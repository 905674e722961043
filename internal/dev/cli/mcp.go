package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// mcpCommand is ljob mcp [http ADDR]: it runs ljob-mcp, the MCP server
// (internal/devtools/mcpserver, in the dev tools' module so that the
// SDK is no dependency of the library), found beside ljob or on the PATH,
// with the client's API flags.
func (c *client) mcpCommand(ctx context.Context, args []string) int {
	bin, err := mcpBinary()
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	flags := []string{"-api", c.base.String()}
	if c.caller != "" {
		flags = append(flags, "-caller", c.caller)
	}
	if c.signer != nil {
		flags = append(flags, "-sigv4", "-region", c.region)
	}
	cmd := exec.CommandContext(ctx, bin, append(append(flags, "--"), args...)...) // args are no flags
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdout, c.stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	return 0
}

// mcpBinary is the path of ljob-mcp: beside this program, or on the PATH.
func mcpBinary() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "ljob-mcp")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	p, err := exec.LookPath("ljob-mcp")
	if err != nil {
		return "", errors.New("ljob-mcp is neither beside ljob nor on the PATH: make cli builds both")
	}
	return p, nil
}
