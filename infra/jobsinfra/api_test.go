package jobsinfra

import (
	"fmt"
	"strings"
	"testing"
)

// Every route requires IAM (or JWT) authorization but the callback
// route, whose token is its authority (deploy.AuthNone): that one has
// none, and a throttle of its own.
func TestBothRoutesRequireAuthorization(t *testing.T) {
	for name, want := range map[string]string{"dev": "AWS_IAM", "prod": "AWS_IAM", "jwt": "JWT"} {
		s := environments(t)[name]
		routes := s.resources("AWS::ApiGatewayV2::Route")
		got := map[string]string{}
		for _, r := range routes {
			p := props(r)
			got[p["RouteKey"].(string)], _ = p["AuthorizationType"].(string)
		}
		for _, key := range RouteKeys {
			want := want
			if key == callbackRoute.Key() {
				want = "NONE"
			}
			if got[key] != want {
				t.Errorf("%s: route %q authorization %q, want %s (routes %v)", name, key, got[key], want, got)
			}
		}
		for _, st := range s.resources("AWS::ApiGatewayV2::Stage") {
			rs := jsonString(props(st)["RouteSettings"])
			if !strings.Contains(rs, `"POST /v1/callbacks/{token}":{"ThrottlingBurstLimit":`+fmt.Sprint(s.cfg.CallbackThrottleBurst)+`,"ThrottlingRateLimit":`+fmt.Sprint(s.cfg.CallbackThrottleRate)+`}`) {
				t.Errorf("%s: the callback route's throttle: %s", name, rs)
			}
		}
		if len(got) != len(RouteKeys) {
			t.Errorf("%s: %d routes, want exactly %d: %v", name, len(got), len(RouteKeys), got)
		}
	}
}

func TestApiHasAccessLogsAndThrottling(t *testing.T) {
	for name, s := range environments(t) {
		stages := s.resources("AWS::ApiGatewayV2::Stage")
		if len(stages) != 1 {
			t.Fatalf("%s: %d stages", name, len(stages))
		}
		for _, st := range stages {
			p := props(st)
			logs, _ := p["AccessLogSettings"].(map[string]any)
			if logs == nil || logs["DestinationArn"] == nil || !strings.Contains(jsonString(logs["Format"]), "$context.requestId") {
				t.Errorf("%s: access logs %v", name, logs)
			}
			route, _ := p["DefaultRouteSettings"].(map[string]any)
			if route == nil || route["ThrottlingRateLimit"] != s.cfg.ThrottleRate || route["ThrottlingBurstLimit"] != float64(s.cfg.ThrottleBurst) {
				t.Errorf("%s: throttling %v", name, route)
			}
		}
	}
}

// Access logs come from the stage's own settings with the error and
// latency fields; batch creation has its own, tighter throttle.
func TestStageLogsAndBatchThrottle(t *testing.T) {
	for name, s := range environments(t) {
		for _, st := range s.resources("AWS::ApiGatewayV2::Stage") {
			p := props(st)
			format := jsonString(p["AccessLogSettings"])
			for _, f := range []string{"integrationLatency", "error.message", "authorizer.error", "integrationErrorMessage"} {
				if !strings.Contains(format, f) {
					t.Errorf("%s: access log format lacks %s: %s", name, f, format)
				}
			}
			rs := jsonString(p["RouteSettings"])
			if !strings.Contains(rs, "POST /v1/batches") || !strings.Contains(rs, fmt.Sprintf(`"ThrottlingRateLimit":%v`, s.cfg.BatchThrottleRate)) {
				t.Errorf("%s: route settings %s", name, rs)
			}
		}
	}
}

// JWT routes carry the scopes asked of them (the wait route GetJob's:
// guarding the read guards the wait); CORS is off unless asked, and lets
// a browser wait (If-None-Match in, ETag out).
func TestJWTScopesAndCORS(t *testing.T) {
	for name, s := range environments(t) {
		for _, r := range s.resources("AWS::ApiGatewayV2::Route") {
			p := props(r)
			scopes := jsonString(p["AuthorizationScopes"])
			switch key := p["RouteKey"]; {
			case name == "jwt" && key == "POST /v1/batches" && scopes != `["jobs/batch"]`,
				name == "jwt" && key == "POST /v1/jobs" && scopes != `["jobs/write"]`,
				name == "jwt" && key == "GET /v1/jobs/{id}" && scopes != `["jobs/read"]`,
				name == "jwt" && key == "GET /v1/jobs/{id}/wait" && scopes != `["jobs/read"]`,
				name == "jwt" && key == "GET /v1/jobs" && scopes != "null",
				name != "jwt" && scopes != "null":
				t.Errorf("%s: %v has scopes %s", name, key, scopes)
			}
		}
		for _, a := range s.resources("AWS::ApiGatewayV2::Api") {
			cors := jsonString(props(a)["CorsConfiguration"])
			if got := strings.Contains(cors, "https://app.example.com") && strings.Contains(cors, "if-none-match") && strings.Contains(cors, `"ExposeHeaders":["etag"]`); got != (name == "jwt") {
				t.Errorf("%s: CORS %s", name, cors)
			}
		}
	}
}
