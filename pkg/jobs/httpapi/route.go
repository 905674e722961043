package httpapi

import (
	"context"
	"log/slog"
	"slices"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// routed is what the router hands a route's endpoint: the caller, whom the
// route's auth admitted, and the route's path parameters (raw segments).
type routed struct {
	caller string
	params map[string]string
}

// endpoint serves one route of the table. It never panics past the
// router, which turns a panic into a 500 problem.
type endpoint func(ctx context.Context, req events.APIGatewayV2HTTPRequest, in routed) events.APIGatewayV2HTTPResponse

// router dispatches requests by the descriptor's route table
// (deploy.Routes, which the construct and the local gateway also read):
// the route's method and path pick its endpoint, and the route's Auth
// says who may call it, checked here before any endpoint runs.
type router struct {
	// routes is the table: deploy.Routes (tests give others).
	routes []deploy.Route
	// endpoints serve the routes this API serves, by route id.
	endpoints map[string]endpoint
	// operators are the identities deploy.AuthOperator admits.
	operators []string
	log       *slog.Logger
	// unmatched is the problem for a request that fits no route served
	// here.
	unmatched func(path string) error
}

var errNoCallerAdmitted = &requestError{code: "forbidden", detail: "this route admits no caller"}

// serve answers req: 404 or 405 (unmatched) when no route served here fits
// it, 401 without a caller identity, 403 when the route's auth does not
// admit the caller (before anything is read, so unknown and known ids look
// alike), else the route's endpoint.
func (r *router) serve(ctx context.Context, req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse) {
	defer recoverTo(ctx, r.log, &resp)
	path := requestPath(req)
	rt, params, ok := routeIn(r.routes, req.RequestContext.HTTP.Method, path)
	ep := r.endpoints[rt.ID]
	if !ok || ep == nil {
		return problem(ctx, r.log, r.unmatched(path))
	}
	caller, ok := Owner(req)
	switch {
	case rt.Auth == deploy.AuthNone:
		caller = "" // its request is its authority, whoever sends it
	case !ok:
		return problem(ctx, r.log, errUnauthenticated)
	}
	switch rt.Auth {
	case deploy.AuthNone, deploy.AuthCaller:
	case deploy.AuthOperator:
		if !slices.Contains(r.operators, caller) {
			return problem(ctx, r.log, errForbidden)
		}
	default:
		// An auth this package does not know admits nobody.
		return problem(ctx, r.log, errNoCallerAdmitted)
	}
	if len(params) > 0 {
		if req.PathParameters == nil {
			req.PathParameters = map[string]string{}
		}
		for k, v := range params {
			req.PathParameters[k] = v
		}
	}
	return ep(ctx, req, routed{caller: caller, params: params})
}

// servesPath reports whether a route served here has path, with any
// method.
func (r *router) servesPath(path string) bool {
	for _, rt := range r.routes {
		if _, ok := rt.Match(rt.Method, path); ok && r.endpoints[rt.ID] != nil {
			return true
		}
	}
	return false
}

// routeIn returns the route of routes a request matches, and its path
// parameters.
func routeIn(routes []deploy.Route, method, path string) (deploy.Route, map[string]string, bool) {
	for _, rt := range routes {
		if params, ok := rt.Match(method, path); ok {
			return rt, params, true
		}
	}
	return deploy.Route{}, nil, false
}

// pathOf is the path of the route named id with its one parameter
// (name: value), as a Location header names a created resource.
func pathOf(id, name, value string) string {
	p, err := deploy.PathOf(id, map[string]string{name: value})
	if err != nil {
		return "" // an empty id: no Location rather than a wrong one
	}
	return p
}
