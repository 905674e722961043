package deploy

import (
	"strings"
)

// Route is one of the API's routes: its method and path (API Gateway's
// route key, {name} matching one path segment), the function that serves
// it, and whether only operators may call it.
type Route struct {
	// ID names the route in the construct (its construct id) and in
	// httpapi's dispatch.
	ID           string
	Method, Path string
	Function     string
	Operator     bool
}

// Key is the route key, as API Gateway and JWTConfig.Scopes name it.
func (r Route) Key() string { return r.Method + " " + r.Path }

// ARNPath is the path as an execute-api ARN matches it: each {param}
// matches any one value.
func (r Route) ARNPath() string { return r.pathWith("*") }

// pathWith is the path with each {param} replaced by v.
func (r Route) pathWith(v string) string {
	segs := strings.Split(r.Path, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segs[i] = v
		}
	}
	return strings.Join(segs, "/")
}

// Match reports whether a request's method and path fit the route, and
// its path parameters.
func (r Route) Match(method, path string) (map[string]string, bool) {
	if method != r.Method {
		return nil, false
	}
	want, got := strings.Split(r.Path, "/"), strings.Split(path, "/")
	if len(want) != len(got) {
		return nil, false
	}
	var params map[string]string
	for i, seg := range want {
		if strings.HasPrefix(seg, "{") {
			if got[i] == "" {
				return nil, false
			}
			if params == nil {
				params = map[string]string{}
			}
			params[strings.Trim(seg, "{}")] = got[i]
			continue
		}
		if seg != got[i] {
			return nil, false
		}
	}
	return params, true
}

// Routes are the API's routes.
var Routes = []Route{
	{"Enqueue", "POST", "/v1/jobs", Enqueue, false},
	{"GetJob", "GET", "/v1/jobs/{id}", GetJob, false},
	{"ListJobs", "GET", "/v1/jobs", GetJob, false},
	{"Counts", "GET", "/v1/counts", GetJob, false},
	{"ListKinds", "GET", "/v1/kinds", GetJob, false},
	{"RetryJob", "POST", "/v1/jobs/{id}/retry", Cancel, false},
	{"ReplayJob", "POST", "/v1/jobs/{id}/replay", Enqueue, false},
	{"BulkAction", "POST", "/v1/bulk/{action}", Cancel, false},
	{"EnqueueBatch", "POST", "/v1/batches", Enqueue, false},
	{"GetBatch", "GET", "/v1/batches/{id}", GetJob, false},
	{"CancelJob", "POST", "/v1/jobs/{id}/cancel", Cancel, false},
	{"CreateSchedule", "POST", "/v1/schedules", Schedules, false},
	{"ListSchedules", "GET", "/v1/schedules", Schedules, false},
	{"GetSchedule", "GET", "/v1/schedules/{name}", Schedules, false},
	{"DeleteSchedule", "DELETE", "/v1/schedules/{name}", Schedules, false},
	{"AdminListJobs", "GET", "/v1/admin/jobs", GetJob, true},
	{"AdminGetJob", "GET", "/v1/admin/jobs/{id}", GetJob, true},
	{"AdminCounts", "GET", "/v1/admin/counts", GetJob, true},
	{"AdminJobAction", "POST", "/v1/admin/jobs/{id}/{action}", Cancel, true},
	{"AdminDeadLetters", "GET", "/v1/admin/dead-letters", Cancel, true},
	{"AdminDeadLetterAction", "POST", "/v1/admin/dead-letters/{action}", Cancel, true},
}

// RouteFor returns the route a request matches, and its path parameters.
func RouteFor(method, path string) (Route, map[string]string, bool) {
	for _, r := range Routes {
		if params, ok := r.Match(method, path); ok {
			return r, params, true
		}
	}
	return Route{}, nil, false
}

// RouteKeys are the routes' keys, in order.
func RouteKeys() []string {
	out := make([]string, len(Routes))
	for i, r := range Routes {
		out[i] = r.Key()
	}
	return out
}
