package hostcheck_test

import (
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/hostcheck"
)

// For refuses an address whose Host it could not know.
func TestForNeedsOneListenAddress(t *testing.T) {
	for _, addr := range []string{"", "127.0.0.1", "127.0.0.1:0", ":8080", "0.0.0.0:8080", "[::]:8080", "localhost"} {
		if _, err := hostcheck.For(addr); err == nil {
			t.Errorf("For(%q): no error, want one", addr)
		}
	}
}

// A server answers its own address and, on loopback, localhost with its
// port; nothing else (another name, another port, a name that resolves to
// the same address).
func TestAllowsOnlyTheServersOwnHost(t *testing.T) {
	for addr, c := range map[string]struct{ allowed, refused []string }{
		"127.0.0.1:8080": {
			allowed: []string{"127.0.0.1:8080", "localhost:8080", "LOCALHOST:8080"},
			refused: []string{"", "evil.example", "evil.example:8080", "127.0.0.1", "127.0.0.1:8081", "localhost", "localhost.:8080", "127.0.0.1.nip.io:8080", "[::1]:8080"},
		},
		"[::1]:9000": {
			allowed: []string{"[::1]:9000", "localhost:9000"},
			refused: []string{"127.0.0.1:9000", "::1:9000", "evil.example:9000"},
		},
		"192.0.2.10:80": {
			allowed: []string{"192.0.2.10:80", "192.0.2.10"},
			refused: []string{"localhost:80", "localhost", "evil.example"},
		},
	} {
		h, err := hostcheck.For(addr)
		if err != nil {
			t.Fatalf("For(%q): %v", addr, err)
		}
		for _, host := range c.allowed {
			if !h.Allows(host) {
				t.Errorf("%s refuses Host %q, want it answered", addr, host)
			}
		}
		for _, host := range c.refused {
			if h.Allows(host) {
				t.Errorf("%s allows Host %q, want 421", addr, host)
			}
		}
	}
	var zero hostcheck.Hosts
	if zero.Allows("127.0.0.1:8080") || zero.Allows("") {
		t.Error("the zero Hosts allows a Host")
	}
}
