package localstack

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/internal/dev/hostcheck"
	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// CallerHeader names the local caller; the gateway turns it into the IAM
// principal arn:aws:iam::000000000000:user/NAME ("local" when absent), so
// owner isolation can be tried locally.
const CallerHeader = apiclient.CallerHeader

// LocalAccount is the account id of local callers.
const LocalAccount = "000000000000"

// maxGatewayBody is API Gateway's payload limit.
// (Lambda itself takes at most 6 MB; httpapi refuses larger batch bodies.)
const maxGatewayBody = 10 << 20

var callerPattern = regexp.MustCompile(`^[A-Za-z0-9+=,.@_-]{1,64}$`)

// Invoker calls a function with an event and returns its answer.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// Gateway is a small stand-in for API Gateway's HTTP API: it turns each HTTP
// request into a payload format 2.0 event, invokes the route's function, and
// turns the function's answer back into HTTP.
type Gateway struct {
	Enqueue Invoker // POST /v1/jobs
	GetJob  Invoker // GET /v1/jobs/{id}, GET /v1/jobs
	WaitJob Invoker // GET /v1/jobs/{id}/wait
	Cancel  Invoker // POST /v1/jobs/{id}/cancel and /retry, POST /v1/bulk/{action}, the admin actions and dead letters
	// Schedules serves POST and GET /v1/schedules, GET and DELETE
	// /v1/schedules/{name}.
	Schedules Invoker
	Logger    *slog.Logger
	Now       func() time.Time
	// Calls, when set, records each request the API serves as the
	// execute-api:Invoke IAM authorises (package iamcalls): a refused one
	// (403) is not served, as API Gateway would not have invoked it.
	Calls *iamcalls.Recorder
}

// principalOf is the deployed principal a local caller stands for: the
// local operator is a role given the construct's GrantOperate, anyone
// else a role given GrantInvoke.
func principalOf(caller string) string {
	if caller == "operator" {
		return iamcalls.Operator
	}
	return iamcalls.Caller
}

func (g *Gateway) logger() *slog.Logger {
	if g.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Logger
}

// function returns the invoker of the named function (deploy's names).
func (g *Gateway) function(name string) Invoker {
	switch name {
	case deploy.Enqueue:
		return g.Enqueue
	case deploy.GetJob:
		return g.GetJob
	case deploy.WaitJob:
		return g.WaitJob
	case deploy.Cancel:
		return g.Cancel
	case deploy.Schedules:
		return g.Schedules
	}
	return nil
}

// ownHostOnly serves next (the gateway and the local stack's Scheduler,
// event bus and stats, all on the API's address) only the requests
// addressed to it, by their Host (hostcheck): another Host, another site's
// name pointed at this machine, gets 421 Misdirected Request and reaches
// no function, as the dashboard answers it.
func ownHostOnly(hosts hostcheck.Hosts, next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hosts.Allows(r.Host) {
			if log != nil {
				log.Warn("gateway: refused a request for another host", slog.String("method", r.Method), slog.String("path", r.URL.Path))
			}
			writeJSON(w, http.StatusMisdirectedRequest, `{"message":"Misdirected Request: this API answers only at http://`+hosts.Addr()+`/"}`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The routes the construct declares (deploy.Routes), matched as API
	// Gateway matches route keys: a {param} is one non-empty segment.
	var fn Invoker
	rt, params, ok := deploy.RouteFor(r.Method, r.URL.Path)
	if ok {
		fn = g.function(rt.Function)
	}
	routeKey := rt.Key()
	if fn == nil {
		// What API Gateway answers for a route it does not have.
		writeJSON(w, http.StatusNotFound, `{"message":"Not Found"}`)
		return
	}
	caller := r.Header.Get(CallerHeader)
	if caller == "" {
		caller = "local"
	}
	if !callerPattern.MatchString(caller) {
		writeJSON(w, http.StatusForbidden, `{"message":"Forbidden"}`)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxGatewayBody+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, `{"message":"Bad Request"}`)
		return
	}
	if len(body) > maxGatewayBody {
		writeJSON(w, http.StatusRequestEntityTooLarge, `{"message":"Request Entity Too Large"}`)
		return
	}
	ev := g.event(r, routeKey, params, caller, body)
	if rt.Auth == deploy.AuthNone {
		// As API Gateway with no authorizer: no caller identity.
		ev.RequestContext.Authorizer = nil
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, `{"message":"Internal Server Error"}`)
		return
	}
	answer, err := fn.Invoke(r.Context(), payload)
	if err != nil {
		g.logger().Warn("gateway: function failed", slog.String("route", routeKey), slog.String("error", err.Error()))
		writeJSON(w, http.StatusInternalServerError, `{"message":"Internal Server Error"}`)
		return
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(answer, &resp); err != nil || resp.StatusCode == 0 {
		writeJSON(w, http.StatusInternalServerError, `{"message":"Internal Server Error"}`)
		return
	}
	if resp.StatusCode != http.StatusForbidden && rt.Auth != deploy.AuthNone {
		g.Calls.Record(iamcalls.Call{Principal: principalOf(caller), Action: "execute-api:Invoke", Resource: "route/" + routeKey})
	}
	out := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if out, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			writeJSON(w, http.StatusInternalServerError, `{"message":"Internal Server Error"}`)
			return
		}
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Apigw-Requestid", ev.RequestContext.RequestID)
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

func (g *Gateway) event(r *http.Request, routeKey string, params map[string]string, caller string, body []byte) events.APIGatewayV2HTTPRequest {
	now := time.Now()
	if g.Now != nil {
		now = g.Now()
	}
	headers := map[string]string{}
	for k, vs := range r.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	query := map[string]string{}
	for k, vs := range r.URL.Query() {
		query[k] = strings.Join(vs, ",")
	}
	var cookies []string
	if c, ok := headers["cookie"]; ok {
		cookies = strings.Split(c, "; ")
		delete(headers, "cookie")
	}
	source := r.RemoteAddr
	if i := strings.LastIndexByte(source, ':'); i > 0 {
		source = source[:i]
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              routeKey,
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		PathParameters:        params,
		QueryStringParameters: query,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     routeKey,
			AccountID:    LocalAccount,
			Stage:        "$default",
			RequestID:    wire.NewID(),
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: "local",
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: source, UserAgent: r.UserAgent(),
			},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
					AccountID: LocalAccount,
					CallerID:  "AIDALOCAL" + strings.ToUpper(caller),
					UserARN:   "arn:aws:iam::" + LocalAccount + ":user/" + caller,
					UserID:    "AIDALOCAL" + strings.ToUpper(caller),
				},
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) && !isBinary(headers["content-type"]) {
			ev.Body = string(body)
		} else {
			ev.Body = base64.StdEncoding.EncodeToString(body)
			ev.IsBase64Encoded = true
		}
	}
	return ev
}

func isBinary(contentType string) bool {
	return strings.HasPrefix(contentType, "application/octet-stream") || strings.HasPrefix(contentType, "image/")
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// FunctionHandler adapts an in-process handler to an Invoker (tests).
type FunctionHandler[In, Out any] func(context.Context, In) (Out, error)

// Invoke decodes the event, calls the handler and encodes its answer.
func (f FunctionHandler[In, Out]) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var in In
	if err := json.Unmarshal(payload, &in); err != nil {
		return nil, err
	}
	out, err := f(ctx, in)
	if err != nil {
		return nil, errors.Join(ErrFunction, err)
	}
	return json.Marshal(out)
}
