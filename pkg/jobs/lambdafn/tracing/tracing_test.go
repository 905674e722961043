package tracing_test

import (
	"net"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/tracecheck"
	"github.com/lambdajobs/lambdajobs/internal/xrayudp"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// With JOBS_TRACING=on and tracing.XRay(), a worker invocation against
// DynamoDB Local sends its spans to the X-Ray daemon's UDP address in the
// daemon's framing, flushed before Invoke returns: the invocation's span
// under Lambda's segment, the job's span in the trace its message carries,
// and the job's DynamoDB calls inside the job's span (tracecheck.Check).
// (Lambda's daemon is stood in for by a UDP socket: locally there is none.)
func TestTracingSendsSpansToTheDaemon(t *testing.T) {
	daemon, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	tracecheck.Worker(t, tracing.XRay(), map[string]string{"AWS_XRAY_DAEMON_ADDRESS": "tcp:127.0.0.1:1 udp:" + daemon.LocalAddr().String()})

	// The flush happened before Invoke returned: the datagrams are there.
	_ = daemon.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 70000)
	tracecheck.Check(t, func() ([]*tracepb.ResourceSpans, error) {
		n, _, err := daemon.ReadFrom(buf)
		if err != nil {
			return nil, err
		}
		if n > xrayudp.MaxDatagram {
			t.Fatalf("a datagram of %d bytes", n)
		}
		return xrayudp.Decode(buf[:n])
	})
}
