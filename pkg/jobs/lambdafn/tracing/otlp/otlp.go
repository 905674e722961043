// Package otlp turns on OpenTelemetry tracing in the functions that
// package lambdafn builds, with spans sent over OTLP/HTTP (protobuf) by
// OpenTelemetry's own exporter (otlptracehttp). A main passes it to
// lambdafn.Serve:
//
//	lambdafn.Serve(lambdafn.Any, reg, &lambdafn.Opts{Tracing: otlp.HTTP()})
//
// and its functions then trace whenever JOBS_TRACING=on, with the spans of
// package pkg/jobs/lambdafn/tracing (see there: the invocation, every AWS
// call, the worker's records, the trace carried through SQS). Only the way
// out differs: where tracing.XRay writes to the X-Ray daemon, HTTP posts
// to an OTLP endpoint at the end of each invocation.
//
// The endpoint is OpenTelemetry's standard configuration, read from the
// process environment: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the full URL),
// else OTEL_EXPORTER_OTLP_ENDPOINT (a base URL, to which /v1/traces is
// added), else http://localhost:4318/v1/traces: where a collector running as
// a Lambda extension listens, such as the ADOT collector layer or
// OpenTelemetry's, which then exports to X-Ray's OTLP endpoint
// (https://xray.<region>.amazonaws.com/v1/traces, signed with the
// function's role) or any other backend. OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, _COMPRESSION and _CERTIFICATE (and their _TRACES_ forms) apply
// as OpenTelemetry documents them. The start refuses an endpoint that is
// not an http or https URL, and a protocol (OTEL_EXPORTER_OTLP_PROTOCOL,
// _TRACES_PROTOCOL) other than http/protobuf, rather than send nowhere.
//
// The export at the end of an invocation waits at most a second, and never
// past 100 ms before the invocation's deadline: a collector that does not
// answer costs the spans, never the invocation. A failed export is not
// retried (the next invocation's spans are sent anyway).
//
// This is a package of its own, apart from package tracing, because the
// exporter links gRPC's packages (through the OTLP protobuf definitions):
// about 8 MB more bootstrap, which a main that traces to the X-Ray daemon
// does not carry.
package otlp

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"

	"github.com/lambdajobs/lambdajobs/internal/oteltrace"
	"github.com/lambdajobs/lambdajobs/internal/tracehook"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

// HTTP is tracing whose spans go over OTLP/HTTP to the endpoint the
// OTEL_EXPORTER_OTLP_* variables name (see the package doc), as
// lambdafn.Opts.Tracing.
func HTTP() lambdafn.Tracing { return httpTracing{} }

type httpTracing struct{}

// flushTimeout bounds the export at the end of an invocation (a POST to a
// collector on localhost takes a few milliseconds).
const flushTimeout = time.Second

func (httpTracing) Start(ctx context.Context, cfg lambdafn.Config) (tracehook.Tracing, error) {
	if err := checkEnv(os.Getenv); err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	return oteltrace.New(exp, cfg.Service, flushTimeout), nil
}

// checkEnv refuses what the exporter would quietly ignore: a protocol it
// does not speak, an endpoint it cannot parse (it would send to
// localhost:4318 instead).
func checkEnv(getenv func(string) string) error {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := getenv(name); v != "" {
			if v != "http/protobuf" {
				return fmt.Errorf("%s=%q: otlp.HTTP sends http/protobuf; set that or leave it unset", name, v)
			}
			break // the traces' own setting wins
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		v := getenv(name)
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s=%q: want an http or https URL such as http://localhost:4318", name, v)
		}
	}
	return nil
}
