// Package tracecheck is the traced worker invocation that the tests of
// each tracing exporter run (pkg/jobs/lambdafn/tracing's to the X-Ray
// daemon, .../tracing/otlp's over OTLP/HTTP), and what they check of the
// spans that reach the exporter's receiver. Tests only.
package tracecheck

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

// The trace headers of the invocation (Lambda's segment) and of the job's
// message (its enqueue's trace).
const (
	LambdaHeader  = "Root=1-674f0000-aaaaaaaaaaaaaaaaaaaaaaaa;Parent=1234567890abcdef;Sampled=1"
	MessageHeader = "Root=1-674f0001-bbbbbbbbbbbbbbbbbbbbbbbb;Parent=fedcba0987654321;Sampled=1"
)

type noPayload struct{}

// Worker enqueues a job in DynamoDB Local and runs one worker invocation of
// it, built by lambdafn with JOBS_TRACING=on, tr as Opts.Tracing and env
// added to its environment, under LambdaHeader, its message carrying
// MessageHeader. It returns once the invocation has (its flush included),
// having checked the job succeeded.
func Worker(t *testing.T, tr lambdafn.Tracing, env map[string]string) {
	t.Helper()
	ddb := testenv.DynamoDB(t)
	table := testenv.NewTable(t, ddb)
	reg := jobs.NewRegistry()
	kind := jobs.MustRegister(reg, "traced", func(context.Context, *jobs.Job[noPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	ctx := context.Background()
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: dynamostore.New(ddb, table, dynamostore.Config{}), Queue: &jobstest.MemQueue{}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := kind.Enqueue(ctx, svc, "o", noPayload{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{deploy.EnvTable.Name: table, deploy.EnvFunction.Name: "worker", deploy.EnvTracing.Name: "on",
		"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t), "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
	for k, v := range env {
		vars[k] = v
	}
	handler, err := lambdafn.Build(ctx, lambdafn.Worker, reg, func(k string) string { return vars[k] }, &lambdafn.Opts{Tracing: tr})
	if err != nil {
		t.Fatal(err)
	}
	// Its spans were flushed before Invoke returned; Close stops the
	// exporter's goroutine (the tests' TestMain checks none is left).
	closer, ok := handler.(io.Closer)
	if !ok {
		t.Fatalf("a traced worker's handler %T is no io.Closer", handler)
	}
	defer func() { _ = closer.Close() }()
	ev, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{
		MessageId: "m-1", Body: message.Encode(res.Job.ID), Attributes: map[string]string{"AWSTraceHeader": MessageHeader},
	}}})
	//lint:ignore SA1029 the key aws-lambda-go itself puts the trace header under
	ictx := context.WithValue(ctx, "x-amzn-trace-id", LambdaHeader)
	ictx, cancel := context.WithTimeout(ictx, 30*time.Second)
	defer cancel()
	if _, err := handler.Invoke(ictx, ev); err != nil {
		t.Fatal(err)
	}
	got, err := svc.Get(ctx, "o", res.Job.ID)
	if err != nil || got.Status != jobs.StatusSucceeded {
		t.Fatalf("job %v %v", got, err)
	}
}

// Check reads exports with next until the worker invocation's span and
// the job's have come, then checks them: the invocation's span under
// Lambda's segment, the job's in the trace its message carries and linked
// to the invocation's, the job's DynamoDB calls inside the job's span (one
// span per call, none of the SDK's internal steps), and every span's
// service.name "worker". An error from next fails the test.
func Check(t *testing.T, next func() ([]*tracepb.ResourceSpans, error)) {
	t.Helper()
	spans := map[string]*tracepb.Span{}
	var names []string
	for spans["worker"] == nil || spans["lambdajobs.process"] == nil {
		rs, err := next()
		if err != nil {
			t.Fatalf("exports ended with spans %v: %v", names, err)
		}
		for _, r := range rs {
			if svcName := resourceAttr(r, "service.name"); svcName != "worker" {
				t.Fatalf("service.name %q", svcName)
			}
			for _, ss := range r.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
					if s.Name == "worker" || s.Name == "lambdajobs.process" {
						spans[s.Name] = s
					} else if strings.HasPrefix(s.Name, "DynamoDB.") {
						spans[s.Name+"#"+hexID(s.SpanId)] = s
					}
				}
			}
		}
	}
	for _, n := range names {
		if !strings.Contains(n, ".") && n != "worker" {
			t.Fatalf("the SDK's internal span %q was sent: one span per AWS call is kept; spans: %v", n, names)
		}
	}
	inv, job := spans["worker"], spans["lambdajobs.process"]
	if hexID(inv.TraceId) != "674f0000aaaaaaaaaaaaaaaaaaaaaaaa" || hexID(inv.ParentSpanId) != "1234567890abcdef" {
		t.Fatalf("the invocation's span is not under Lambda's segment: trace %s parent %s", hexID(inv.TraceId), hexID(inv.ParentSpanId))
	}
	if hexID(job.TraceId) != "674f0001bbbbbbbbbbbbbbbbbbbbbbbb" || hexID(job.ParentSpanId) != "fedcba0987654321" {
		t.Fatalf("the job's span is not in its message's trace: trace %s parent %s", hexID(job.TraceId), hexID(job.ParentSpanId))
	}
	if len(job.Links) != 1 || hexID(job.Links[0].SpanId) != hexID(inv.SpanId) {
		t.Fatalf("the job's span does not link the invocation: %v", job.Links)
	}
	calls := 0
	for name, s := range spans {
		if strings.HasPrefix(name, "DynamoDB.") && hexID(s.ParentSpanId) == hexID(job.SpanId) {
			calls++
		}
	}
	if calls < 2 { // the claim and the final write
		t.Fatalf("%d DynamoDB calls inside the job's span; spans: %v", calls, names)
	}
}

func hexID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func resourceAttr(r *tracepb.ResourceSpans, key string) string {
	for _, a := range r.GetResource().GetAttributes() {
		if a.Key == key {
			return a.GetValue().GetStringValue()
		}
	}
	return ""
}
