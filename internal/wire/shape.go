package wire

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/lambdajobs/lambdajobs/internal/jsonin"
)

type spanHeaderKey struct{}

// WithSpanHeader returns ctx carrying f, which returns the X-Ray trace
// header of a context's current span ("Root=...;Parent=...;Sampled=..."),
// or "" when it has none. A traced function's invocation context carries
// it (internal/oteltrace); without tracing nothing of a tracing library is
// linked and no span exists.
func WithSpanHeader(ctx context.Context, f func(ctx context.Context) string) context.Context {
	return context.WithValue(ctx, spanHeaderKey{}, f)
}

// TraceHeader returns the X-Ray trace header of ctx's span, or "" when ctx
// has no valid span or carries no way to read one (see WithSpanHeader).
func TraceHeader(ctx context.Context) string {
	f, _ := ctx.Value(spanHeaderKey{}).(func(context.Context) string)
	if f == nil {
		return ""
	}
	return f(ctx)
}

// DescribeShape names the shape of a message body without quoting it, for
// logs and the dashboard's dead-letter page: its length and, for a JSON
// object, its top-level keys (at most 8).
func DescribeShape(body string) string {
	keys, ok := TopLevelKeys(body, 8)
	if !ok {
		return fmt.Sprintf("non-JSON body of %d bytes", len(body))
	}
	return fmt.Sprintf("JSON object of %d bytes with keys %v", len(body), keys)
}

// TopLevelKeys returns up to max top-level keys of a JSON object (each cut
// to 32 bytes), or false if body is not a JSON object.
func TopLevelKeys(body string, max int) ([]string, bool) {
	if jsonin.Check([]byte(body), 256<<10) != nil {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &obj) != nil {
		return nil, false
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, jsonin.Truncate(k, 32))
	}
	sort.Strings(keys)
	if len(keys) > max {
		keys = keys[:max]
	}
	return keys, true
}

// DerivedJobIDs returns the ids of the jobs a foreign message becomes if a
// route accepts it, and whether the worker acknowledges it without a job
// (s3:TestEvent): package jobs sets it (its routes know the shapes), so
// producers' tools (ljob drop) tell where their message went.
var DerivedJobIDs func(body, messageID, envelopeOwner string) (ids []string, acknowledged bool)

// SetJobPublish sets what Publish does on a *jobs.Job[P] built outside a
// worker (jobstest.NewJob): package jobs sets it.
var SetJobPublish func(job any, publish func(context.Context, []byte) error)
