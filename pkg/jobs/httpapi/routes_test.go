package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// Every route of the deployment's descriptor has an endpoint here, and
// every endpoint serves a route of it: a route added to or removed from
// deploy.Routes without its endpoint fails here.
func TestEveryRouteOfTheDescriptorIsServed(t *testing.T) {
	api, sched := (&API{}).endpoints(), (&Schedules{}).endpoints()
	ids := map[string]bool{}
	for _, rt := range deploy.Routes {
		ids[rt.ID] = true
		switch {
		case rt.Function == deploy.Schedules:
			if sched[rt.ID] == nil {
				t.Errorf("%s (%s): the schedules API does not serve it", rt.ID, rt.Key())
			}
		case api[rt.ID] == nil:
			t.Errorf("%s (%s): no endpoint", rt.ID, rt.Key())
		}
	}
	for _, eps := range []map[string]endpoint{api, sched} {
		for id := range eps {
			if !ids[id] {
				t.Errorf("an endpoint serves %s, which the descriptor does not have", id)
			}
		}
	}
}

// requestAs is a request of caller (an IAM user; "" none) for method and
// path.
func requestAs(caller, method, path string) events.APIGatewayV2HTTPRequest {
	req := events.APIGatewayV2HTTPRequest{RawPath: path}
	req.RequestContext.HTTP.Method = method
	if caller != "" {
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/" + caller}}
	}
	return req
}

func problemCode(t *testing.T, resp events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	var p Problem
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
		t.Fatalf("%d %s: not a problem: %v", resp.StatusCode, resp.Body, err)
	}
	return p.Code
}

// Who may call a route is the table's Auth, enforced by the router before
// the route's endpoint runs: the same table with another auth on a route
// changes who gets through, and an auth the router does not know admits
// nobody. The endpoints here record whether they ran.
func TestAuthIsEnforcedFromTheTable(t *testing.T) {
	const operator = "arn:aws:iam::123456789012:user/op"
	ran := map[string]int{}
	eps := map[string]endpoint{}
	for _, rt := range deploy.Routes {
		eps[rt.ID] = func(context.Context, events.APIGatewayV2HTTPRequest, routed) events.APIGatewayV2HTTPResponse {
			ran[rt.ID]++
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK}
		}
	}
	table := func(auth map[string]deploy.Auth) []deploy.Route {
		out := append([]deploy.Route(nil), deploy.Routes...)
		for i, rt := range out {
			if a, ok := auth[rt.ID]; ok {
				out[i].Auth = a
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		routes []deploy.Route
		route  string
		caller string
		status int
	}{
		{"a caller on a caller's route", deploy.Routes, deploy.RouteListKinds, "alice", http.StatusOK},
		{"no identity on a caller's route", deploy.Routes, deploy.RouteListKinds, "", http.StatusUnauthorized},
		{"a caller on an operator's route", deploy.Routes, deploy.RouteAdminCounts, "alice", http.StatusForbidden},
		{"an operator on an operator's route", deploy.Routes, deploy.RouteAdminCounts, "op", http.StatusOK},
		{"a caller on a route the table makes an operator's", table(map[string]deploy.Auth{deploy.RouteListKinds: deploy.AuthOperator}), deploy.RouteListKinds, "alice", http.StatusForbidden},
		{"a caller on a route the table opens to callers", table(map[string]deploy.Auth{deploy.RouteAdminCounts: deploy.AuthCaller}), deploy.RouteAdminCounts, "alice", http.StatusOK},
		{"an operator on a route of an unknown auth", table(map[string]deploy.Auth{deploy.RouteAdminCounts: "nobody"}), deploy.RouteAdminCounts, "op", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := deploy.RouteByID(tc.route)
			before := ran[tc.route]
			r := &router{log: slog.New(slog.DiscardHandler), routes: tc.routes, endpoints: eps, operators: []string{operator}, unmatched: func(string) error { return errScheduleNotFound }}
			resp := r.serve(context.Background(), requestAs(tc.caller, rt.Method, rt.Path))
			if resp.StatusCode != tc.status {
				t.Fatalf("%s %s: got %d %s, want %d", rt.Method, rt.Path, resp.StatusCode, resp.Body, tc.status)
			}
			if ranNow := ran[tc.route] > before; ranNow != (tc.status == http.StatusOK) {
				t.Errorf("the endpoint ran: %v, with status %d", ranNow, resp.StatusCode)
			}
			if tc.status == http.StatusForbidden && problemCode(t, resp) != "forbidden" {
				t.Errorf("got %s, want the forbidden problem", resp.Body)
			}
		})
	}
}

// A panic in an endpoint is a 500 problem, never a crash.
func TestAPanicInAnEndpointIsA500(t *testing.T) {
	boom := func(context.Context, events.APIGatewayV2HTTPRequest, routed) events.APIGatewayV2HTTPResponse {
		panic("boom")
	}
	r := &router{log: slog.New(slog.DiscardHandler), routes: deploy.Routes, endpoints: map[string]endpoint{deploy.RouteListKinds: boom}, unmatched: func(string) error { return errScheduleNotFound }}
	rt, _ := deploy.RouteByID(deploy.RouteListKinds)
	resp := r.serve(context.Background(), requestAs("alice", rt.Method, rt.Path))
	if resp.StatusCode != http.StatusInternalServerError || problemCode(t, resp) != "internal" {
		t.Fatalf("got %d %s, want a 500 problem", resp.StatusCode, resp.Body)
	}
}
