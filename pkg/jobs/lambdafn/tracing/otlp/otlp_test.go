package otlp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/tracecheck"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing/otlp"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// export is one request the receiver got.
type export struct {
	path, contentType string
	spans             []*tracepb.ResourceSpans
	err               error
}

// receiver is an OTLP/HTTP endpoint on 127.0.0.1 that decodes each
// request's ExportTraceServiceRequest (protobuf) and hands it to exports.
func receiver(t *testing.T) (*httptest.Server, chan export) {
	exports := make(chan export, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := export{path: r.URL.Path, contentType: r.Header.Get("Content-Type")}
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		e.spans, e.err = req.ResourceSpans, err
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
		exports <- e
	}))
	t.Cleanup(srv.Close)
	return srv, exports
}

// With JOBS_TRACING=on and otlp.HTTP(), a worker invocation against
// DynamoDB Local posts its spans, before Invoke returns, to the endpoint
// OTEL_EXPORTER_OTLP_ENDPOINT names (its /v1/traces, in protobuf): the
// invocation's span with the Lambda trace's ids, the job's span in its
// message's trace, and the job's DynamoDB calls as its children
// (tracecheck.Check, which the X-Ray daemon's test runs too).
func TestHTTPSendsSpansToTheEndpoint(t *testing.T) {
	srv, exports := receiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	tracecheck.Worker(t, otlp.HTTP(), nil)
	tracecheck.Check(t, func() ([]*tracepb.ResourceSpans, error) {
		select {
		case e := <-exports:
			if e.path != "/v1/traces" || e.contentType != "application/x-protobuf" {
				t.Fatalf("an export to %s as %q, want /v1/traces as application/x-protobuf", e.path, e.contentType)
			}
			return e.spans, e.err
		default: // the flush happened before Invoke returned
			return nil, errors.New("no more exports")
		}
	})
}

// What the exporter would quietly ignore (a protocol it does not speak, an
// endpoint it cannot parse: it would send to localhost:4318 instead)
// stops the function's start with an error naming the variable.
func TestHTTPRefusesWhatTheExporterWouldIgnore(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://collector/v1/traces"},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			_, err := build(t, func() {})
			if err == nil || !strings.Contains(err.Error(), c.name) {
				t.Fatalf("got %v, want an error naming %s", err, c.name)
			}
		})
	}
	t.Run("http/protobuf", func(t *testing.T) {
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://collector.example:4318/v1/traces")
		if _, err := build(t, func() {}); err != nil {
			t.Fatal(err)
		}
	})
}

// build builds a function of handler with JOBS_TRACING=on and otlp.HTTP().
func build(t *testing.T, handler any) (lambda.Handler, error) {
	t.Helper()
	getenv := func(k string) string {
		return map[string]string{"JOBS_TABLE": "t", "JOBS_FUNCTION": "getjob", "JOBS_TRACING": "on", "AWS_REGION": "us-east-1"}[k]
	}
	fn := func(*lambdafn.Deps, *jobs.Registry) (lambda.Handler, error) { return lambda.NewHandler(handler), nil }
	h, err := lambdafn.Build(context.Background(), fn, jobs.NewRegistry(), getenv, &lambdafn.Opts{Tracing: otlp.HTTP()})
	if c, ok := h.(io.Closer); ok {
		// Its exporter's goroutine ends with the test (TestMain's goleak).
		t.Cleanup(func() { _ = c.Close() })
	}
	return h, err
}

// A collector that does not answer, or answers an error, costs the spans,
// never the invocation: the flush ends before the invocation's deadline
// (100 ms before it), and a failed export is not retried.
func TestHTTPNeverHoldsTheInvocation(t *testing.T) {
	//lint:ignore SA1029 the key aws-lambda-go itself puts the trace header under
	traced := context.WithValue(context.Background(), "x-amzn-trace-id", tracecheck.LambdaHeader)
	t.Run("no answer", func(t *testing.T) {
		got, release := make(chan struct{}, 1), make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
		h, err := build(t, func() {})
		if err != nil {
			t.Fatal(err)
		}
		// Under the flush's own bound (a second), so the deadline is what
		// ends it.
		deadline := time.Now().Add(500 * time.Millisecond)
		ctx, cancel := context.WithDeadline(traced, deadline)
		defer cancel()
		if _, err := h.Invoke(ctx, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if now := time.Now(); !now.Before(deadline) {
			t.Fatalf("Invoke returned %v after the invocation's deadline", now.Sub(deadline))
		}
		select {
		case <-got:
		default:
			t.Fatal("the flush never reached the collector")
		}
	})
	t.Run("an error", func(t *testing.T) {
		requests := make(chan struct{}, 16)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests <- struct{}{}
			w.WriteHeader(http.StatusServiceUnavailable) // retryable, for OpenTelemetry's exporter
		}))
		defer srv.Close()
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
		h, err := build(t, func() {})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(traced, 30*time.Second)
		defer cancel()
		began := time.Now()
		if _, err := h.Invoke(ctx, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		// A retry would wait its backoff (5 s at first) up to the flush's
		// bound of a second.
		if took := time.Since(began); took > 500*time.Millisecond || len(requests) != 1 {
			t.Fatalf("Invoke took %v and made %d export requests, want one, not retried", took, len(requests))
		}
	})
}
