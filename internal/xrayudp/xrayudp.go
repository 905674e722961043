// Package xrayudp sends OpenTelemetry spans to the X-Ray daemon that Lambda
// runs next to every function with active tracing, over UDP, in the
// daemon's OTLP framing: the same path AWS's own OpenTelemetry
// distributions take in Lambda (their "UDP exporter"). No collector layer,
// no HTTP call, nothing to wait for at the end of an invocation but a local
// datagram.
//
// A datagram is the daemon's header line, then "T1S" and the base64 of an
// OTLP ExportTraceServiceRequest in protobuf. The daemon takes datagrams of
// up to 64 KiB, so a large export is split, by resource, scope and span.
package xrayudp

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Header starts every datagram; Prefix marks its body as sampled OTLP
// traces in protobuf, base64-encoded.
const (
	Header = "{\"format\":\"json\",\"version\":1}\n"
	Prefix = "T1S"
)

// MaxDatagram is the largest datagram sent (the daemon's limit is 64 KiB).
const MaxDatagram = 64000

// DefaultAddress is the daemon's address when AWS_XRAY_DAEMON_ADDRESS is
// not set.
const DefaultAddress = "127.0.0.1:2000"

// Address returns the UDP address in an AWS_XRAY_DAEMON_ADDRESS value,
// which is "host:port" or "tcp:host:port udp:host:port" (either order).
func Address(v string) string {
	v = strings.TrimSpace(v)
	if v == "" {
		return DefaultAddress
	}
	for _, f := range strings.Fields(v) {
		if a, ok := strings.CutPrefix(f, "udp:"); ok {
			return a
		}
	}
	if strings.Contains(v, " ") || strings.HasPrefix(v, "tcp:") {
		return DefaultAddress
	}
	return v
}

// Client is an otlptrace.Client that writes to the daemon.
type Client struct {
	addr string
	mu   sync.Mutex
	conn net.Conn
}

// New returns a Client for the daemon at addr (host:port).
func New(addr string) *Client { return &Client{addr: addr} }

// Start dials the daemon (UDP: nothing is exchanged).
func (c *Client) Start(context.Context) error {
	conn, err := net.Dial("udp", c.addr)
	if err != nil {
		return fmt.Errorf("xrayudp: %w", err)
	}
	c.mu.Lock()
	c.conn = conn
	c.mu.Unlock()
	return nil
}

// Stop closes the socket.
func (c *Client) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// UploadTraces sends the spans in as few datagrams as fit.
func (c *Client) UploadTraces(_ context.Context, spans []*tracepb.ResourceSpans) error {
	datagrams, err := Encode(spans)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return errors.New("xrayudp: not started")
	}
	for _, d := range datagrams {
		if _, werr := c.conn.Write(d); werr != nil {
			err = errors.Join(err, fmt.Errorf("xrayudp: %w", werr))
		}
	}
	return err
}

// Encode frames spans as datagrams of at most MaxDatagram bytes. A single
// span too large for one datagram is dropped and reported.
func Encode(spans []*tracepb.ResourceSpans) ([][]byte, error) {
	var out [][]byte
	var errs []error
	var add func(rs []*tracepb.ResourceSpans)
	add = func(rs []*tracepb.ResourceSpans) {
		if len(rs) == 0 {
			return
		}
		d, err := frame(rs)
		if err != nil {
			errs = append(errs, err)
			return
		}
		if len(d) <= MaxDatagram {
			out = append(out, d)
			return
		}
		parts := split(rs)
		if parts == nil {
			errs = append(errs, fmt.Errorf("xrayudp: a span of %d bytes does not fit a datagram; dropped", len(d)))
			return
		}
		for _, p := range parts {
			add(p)
		}
	}
	add(spans)
	return out, errors.Join(errs...)
}

// frame encodes an ExportTraceServiceRequest: its only field is
// "repeated ResourceSpans resource_spans = 1". (Written with protowire
// rather than the collector package, which would link gRPC.)
func frame(rs []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	for _, r := range rs {
		m, err := proto.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("xrayudp: %w", err)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	d := make([]byte, 0, len(Header)+len(Prefix)+base64.StdEncoding.EncodedLen(len(b)))
	d = append(d, Header...)
	d = append(d, Prefix...)
	return base64.StdEncoding.AppendEncode(d, b), nil
}

// split halves an export: by resource, else by scope, else by span; nil
// when it holds one span.
func split(rs []*tracepb.ResourceSpans) [][]*tracepb.ResourceSpans {
	if len(rs) > 1 {
		return [][]*tracepb.ResourceSpans{rs[:len(rs)/2], rs[len(rs)/2:]}
	}
	r := rs[0]
	with := func(ss []*tracepb.ScopeSpans) []*tracepb.ResourceSpans {
		return []*tracepb.ResourceSpans{{Resource: r.Resource, SchemaUrl: r.SchemaUrl, ScopeSpans: ss}}
	}
	if len(r.ScopeSpans) > 1 {
		n := len(r.ScopeSpans) / 2
		return [][]*tracepb.ResourceSpans{with(r.ScopeSpans[:n]), with(r.ScopeSpans[n:])}
	}
	if len(r.ScopeSpans) == 1 && len(r.ScopeSpans[0].Spans) > 1 {
		s := r.ScopeSpans[0]
		n := len(s.Spans) / 2
		half := func(sp []*tracepb.Span) []*tracepb.ResourceSpans {
			return with([]*tracepb.ScopeSpans{{Scope: s.Scope, SchemaUrl: s.SchemaUrl, Spans: sp}})
		}
		return [][]*tracepb.ResourceSpans{half(s.Spans[:n]), half(s.Spans[n:])}
	}
	return nil
}

// Decode parses one datagram back into its resource spans (for tests and
// tools).
func Decode(d []byte) ([]*tracepb.ResourceSpans, error) {
	s, ok := strings.CutPrefix(string(d), Header)
	if !ok {
		return nil, errors.New("xrayudp: no header")
	}
	s, ok = strings.CutPrefix(s, Prefix)
	if !ok {
		return nil, errors.New("xrayudp: no T1S prefix")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("xrayudp: %w", err)
	}
	var out []*tracepb.ResourceSpans
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("xrayudp: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, fmt.Errorf("xrayudp: %w", protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		m, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, fmt.Errorf("xrayudp: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var r tracepb.ResourceSpans
		if err := proto.Unmarshal(m, &r); err != nil {
			return nil, fmt.Errorf("xrayudp: %w", err)
		}
		out = append(out, &r)
	}
	return out, nil
}
