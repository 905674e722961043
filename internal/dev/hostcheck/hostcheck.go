// Package hostcheck tells whether a request was addressed to the server
// that received it, by its Host. A local server that acts for its caller
// (the dashboard, the local stack's API) answers only requests for the
// address it listens on: another Host is another site's name pointed at
// this machine (DNS rebinding), whose pages would be that site's origin,
// free to read the answers and to send requests with the caller's
// identity. Such a request should get 421 Misdirected Request, before
// anything else runs; each server writes its own answer.
package hostcheck

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Hosts is the Host values a server listening on one address answers:
// that address and, when it is a loopback address, localhost with the same
// port (on port 80, each without the port too, as browsers send it).
type Hosts struct {
	addr  string
	hosts map[string]bool
}

// For returns the Hosts of a server listening on addr, the address its
// listener reports (ln.Addr().String(), such as 127.0.0.1:8080). It
// refuses an address without a host or a port, port 0, and an address on
// every interface (0.0.0.0, ::), whose Host it cannot know.
func For(addr string) (Hosts, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" || port == "0" {
		return Hosts{}, fmt.Errorf("%q is not the address a listener reports (host:port)", addr)
	}
	ip, err := netip.ParseAddr(host)
	if err == nil && ip.IsUnspecified() {
		return Hosts{}, fmt.Errorf("%q is every interface: listen on one address, so that the Host to answer is known", addr)
	}
	hosts := map[string]bool{strings.ToLower(net.JoinHostPort(host, port)): true}
	if (err == nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
		hosts["localhost:"+port] = true
	}
	if port == "80" { // browsers leave the default port out of Host
		for h := range hosts {
			hosts[strings.TrimSuffix(h, ":80")] = true
		}
	}
	return Hosts{addr: addr, hosts: hosts}, nil
}

// Addr is the address the Hosts were made for.
func (h Hosts) Addr() string { return h.addr }

// Allows reports whether a request whose Host is host (r.Host) was
// addressed to this server. Hosts' zero value allows none.
func (h Hosts) Allows(host string) bool { return h.hosts[strings.ToLower(host)] }
