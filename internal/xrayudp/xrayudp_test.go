package xrayudp

import (
	"strings"
	"testing"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

func TestAddress(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      DefaultAddress,
		"169.254.79.129:2000":                   "169.254.79.129:2000",
		"tcp:127.0.0.1:2000 udp:127.0.0.2:2001": "127.0.0.2:2001",
		"udp:127.0.0.2:2001 tcp:127.0.0.1:2000": "127.0.0.2:2001",
		"tcp:127.0.0.1:2000":                    DefaultAddress,
	} {
		if got := Address(in); got != want {
			t.Errorf("Address(%q) = %q, want %q", in, got, want)
		}
	}
}

func spans(n, attrBytes int) []*tracepb.ResourceSpans {
	var ss []*tracepb.Span
	for i := range n {
		ss = append(ss, &tracepb.Span{
			TraceId: make([]byte, 16), SpanId: []byte{0, 0, 0, 0, 0, 0, byte(i >> 8), byte(i)}, Name: "s",
			Attributes: []*commonpb.KeyValue{{Key: "k", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: strings.Repeat("x", attrBytes)}}}},
		})
	}
	return []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: ss}}}}
}

// An export is framed as the daemon expects and decodes back whole; a large
// one is split into datagrams under the daemon's limit with no span lost; a
// single span beyond the limit is dropped and reported, not sent cut.
func TestEncodeSplitsAndRoundTrips(t *testing.T) {
	ds, err := Encode(spans(3, 10))
	if err != nil || len(ds) != 1 || !strings.HasPrefix(string(ds[0]), Header+Prefix) {
		t.Fatalf("small export: %d datagrams, %v", len(ds), err)
	}
	ds, err = Encode(spans(200, 1000))
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) < 4 {
		t.Fatalf("200 spans of 1 KB in %d datagrams", len(ds))
	}
	seen := map[string]bool{}
	for _, d := range ds {
		if len(d) > MaxDatagram {
			t.Fatalf("datagram of %d bytes", len(d))
		}
		rs, err := Decode(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			for _, s := range r.ScopeSpans {
				for _, sp := range s.Spans {
					seen[string(sp.SpanId)] = true
				}
			}
		}
	}
	if len(seen) != 200 {
		t.Fatalf("%d of 200 spans arrived", len(seen))
	}
	ds, err = Encode(append(spans(1, 60000), spans(1, 10)...))
	if err == nil || len(ds) != 1 {
		t.Fatalf("an oversized span: %d datagrams, %v", len(ds), err)
	}
}
