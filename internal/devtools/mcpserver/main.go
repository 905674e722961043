package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lambdajobs/lambdajobs/internal/dev/cli"
	"github.com/lambdajobs/lambdajobs/internal/dev/hostcheck"
)

// Version is the server's version as it tells its clients.
const Version = "v0.1.0"

// Path is where the streamable HTTP transport answers.
const Path = "/mcp"

// Main runs ljob-mcp with args: ljob's API flags, then nothing (stdio)
// or "http ADDR" (streamable HTTP on ADDR). It returns the exit status.
func Main(ctx context.Context, args []string, env cli.Env) int {
	api, rest, ok := cli.APIClient(ctx, args, env)
	if !ok {
		return 1
	}
	listen := ""
	switch {
	case len(rest) == 2 && rest[0] == "http":
		listen = rest[1]
	case len(rest) != 0:
		fmt.Fprintf(env.Stderr, "ljob-mcp: unexpected arguments %q: ljob's flags (-api, -caller, -sigv4, -region), then nothing (stdio) or http ADDR\n", rest)
		return 1
	}
	s, err := New(ctx, api, Version)
	if err != nil {
		fmt.Fprintln(env.Stderr, "ljob-mcp:", err)
		return 1
	}
	if listen == "" {
		err = s.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(env.Stdin), Writer: nopWriteCloser{env.Stdout}})
	} else {
		err = serveHTTP(ctx, s, listen, env.Stderr)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(env.Stderr, "ljob-mcp:", err)
		return 1
	}
	return 0
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveHTTP serves s over streamable HTTP at Path on addr until ctx ends.
func serveHTTP(ctx context.Context, s *mcp.Server, addr string, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(hostOf(ln.Addr().String())); ip == nil || !ip.IsLoopback() {
		ln.Close()
		return fmt.Errorf("%s is not a loopback address: the MCP server acts with the caller's identity and has no login of its own, so it listens on this machine only (127.0.0.1)", ln.Addr())
	}
	h, err := Handler(s, ln.Addr().String())
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(slog.NewTextHandler(stderr, nil), slog.LevelWarn)}
	fmt.Fprintf(stderr, "ljob-mcp: serving MCP at http://%s%s\n", ln.Addr(), Path)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return ctx.Err()
}

// Handler is s over streamable HTTP at Path, for a server listening on
// addr (its listener's address): a request for another Host gets 421
// (DNS rebinding: another site's name pointed at this machine), a
// cross-site browser request 403.
func Handler(s *mcp.Server, addr string) (http.Handler, error) {
	hosts, err := hostcheck.For(addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(Path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.Allows(r.Host) {
			http.Error(w, "misdirected request: this server answers "+hosts.Addr()+" only", http.StatusMisdirectedRequest)
			return
		}
		if crossSite(r) {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		mux.ServeHTTP(w, r)
	}), nil
}

// crossSite reports whether a browser sent r from another site, whatever
// its method: Sec-Fetch-Site says so, or an Origin names another host.
func crossSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || !strings.EqualFold(u.Host, r.Host)
}

// hostOf is the host of a host:port address.
func hostOf(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	return host
}
