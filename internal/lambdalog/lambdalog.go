// Package lambdalog is the functions' logger: JSON lines as Lambda's JSON
// log format writes them, as short as what an operator reads allows.
package lambdalog

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// New returns the functions' logger (lambdafn.Serve's): one JSON object per
// line as Lambda's JSON log format writes them ("level", "message"), at
// the level Lambda's ApplicationLogLevel gives (AWS_LAMBDA_LOG_LEVEL;
// INFO when unset), to w.
//
// A line carries no timestamp: CloudWatch Logs stamps every event it
// ingests (the @timestamp Logs Insights reads), so a line's own would be
// 50 bytes said twice. Warnings and errors carry the invocation's request
// id ("requestId"), which ties them to Lambda's START and REPORT lines;
// the INFO lines do not: each names its job (job_id), which is how an
// operator finds a run, and the request id is the same for every job of a
// batch. docs/evidence/BENCHMARKS.md counts the bytes a job writes.
func New(w io.Writer, getenv func(string) string) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: logLevel(getenv("AWS_LAMBDA_LOG_LEVEL")), ReplaceAttr: lineAttr})
	return slog.New(requestIDHandler{h})
}

// logLevel is the slog level of Lambda's ApplicationLogLevel.
func logLevel(s string) slog.Level {
	switch strings.ToUpper(s) {
	case "TRACE", "DEBUG":
		return slog.LevelDebug
	case "WARN":
		return slog.LevelWarn
	case "ERROR", "FATAL":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// lineAttr drops the timestamp and names the message as Lambda's JSON
// log format does.
func lineAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) > 0 {
		return a
	}
	switch a.Key {
	case slog.TimeKey:
		return slog.Attr{}
	case slog.MessageKey:
		a.Key = "message"
	}
	return a
}

// requestIDHandler adds the invocation's request id to warnings and
// errors.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
