package iamcalls

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
)

// Unmapped is the action recorded for a request Map cannot map: the
// evaluation fails on it, naming the request's target.
const Unmapped = "iamcalls:Unmapped"

var credential = regexp.MustCompile(`Credential=([A-Za-z0-9]+)/`)

// PrincipalOf returns the principal that signed r (its SigV4 access key
// id, from its Authorization header or, for a presigned URL, its query),
// or "" for an unsigned request.
func PrincipalOf(r *http.Request) string {
	if m := credential.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		return m[1]
	}
	if c := r.URL.Query().Get("X-Amz-Credential"); c != "" {
		id, _, _ := strings.Cut(c, "/")
		return id
	}
	return ""
}

// Proxy forwards every request to an AWS endpoint (an emulator, or the
// fault proxy in front of one) and records the calls of each request
// signed by a principal other than the Harness.
type Proxy struct {
	rec   *Recorder
	names Names
	fwd   *httputil.ReverseProxy
	srv   *http.Server
	ln    net.Listener
}

// StartProxy starts a Proxy to target on a free loopback port.
func StartProxy(target string, names Names, rec *Recorder) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{rec: rec, names: names, fwd: httputil.NewSingleHostReverseProxy(u), ln: ln}
	p.srv = &http.Server{Handler: p}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's endpoint.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// SetNames changes what the proxy knows of the stack's resources (the
// queues' URLs are known only once they exist).
func (p *Proxy) SetNames(n Names) { p.names = n }

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if principal := PrincipalOf(r); principal != "" && principal != Harness {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		target := r.Header.Get("X-Amz-Target")
		var calls []Call
		if target == "" { // S3's REST protocol
			calls, err = MapS3(principal, r, p.names)
			target = "S3 " + r.Method
		} else {
			calls, err = Map(principal, target, body, p.names)
		}
		if err != nil {
			calls = []Call{{Principal: principal, Action: Unmapped, Resource: target + ": " + err.Error()}}
		}
		p.rec.Record(calls...)
	}
	p.fwd.ServeHTTP(w, r)
}
