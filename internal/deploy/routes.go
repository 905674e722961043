package deploy

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Auth says who may call a route. httpapi enforces it for every request
// before the route's handler runs; the construct grants execute-api:Invoke
// by it (GrantInvoke the callers' routes, GrantOperate every route).
type Auth string

const (
	// AuthCaller: any authenticated caller (an IAM principal or a JWT
	// subject), acting on its own jobs and schedules.
	AuthCaller Auth = "caller"
	// AuthOperator: only the deployment's operators (Config.Operators, the
	// roles given GrantOperate); anyone else gets 403 before anything is
	// read.
	AuthOperator Auth = "operator"
	// AuthNone: anyone, without a caller identity; the request itself
	// carries its authority (a callback token, checked by httpapi before
	// anything is read). The construct gives such a route no authorizer
	// and a throttle of its own.
	AuthNone Auth = "none"
)

// Route is one of the API's routes: its method and path (API Gateway's
// route key, {name} matching one path segment), the function that serves
// it, and who may call it.
type Route struct {
	// ID names the route in the construct (its construct id), in
	// httpapi's dispatch and in the API client's calls (the Route*
	// constants).
	ID           string
	Method, Path string
	Function     string
	Auth         Auth
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

// PathFor is the route's path with each {param} replaced by params'
// value, escaped as one path segment. A parameter missing or empty, or
// one the path does not have, is an error.
func (r Route) PathFor(params map[string]string) (string, error) {
	segs := strings.Split(r.Path, "/")
	used := 0
	for i, s := range segs {
		name, ok := strings.CutPrefix(s, "{")
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, "}")
		v := params[name]
		if v == "" {
			return "", fmt.Errorf("route %s (%s): path parameter %q is required", r.ID, r.Key(), name)
		}
		segs[i] = url.PathEscape(v)
		used++
	}
	if used != len(params) {
		return "", fmt.Errorf("route %s (%s) has path parameters %v only", r.ID, r.Key(), r.params())
	}
	return strings.Join(segs, "/"), nil
}

// params are the names of the route's path parameters.
func (r Route) params() []string {
	var out []string
	for _, s := range strings.Split(r.Path, "/") {
		if strings.HasPrefix(s, "{") {
			out = append(out, strings.Trim(s, "{}"))
		}
	}
	return out
}

// The routes' ids, as Routes names them.
const (
	RouteEnqueue               = "Enqueue"
	RouteGetJob                = "GetJob"
	RouteWaitJob               = "WaitJob"
	RouteListJobs              = "ListJobs"
	RouteCounts                = "Counts"
	RouteListKinds             = "ListKinds"
	RouteRetryJob              = "RetryJob"
	RouteReplayJob             = "ReplayJob"
	RouteBulkAction            = "BulkAction"
	RouteEnqueueBatch          = "EnqueueBatch"
	RouteGetBatch              = "GetBatch"
	RouteCancelJob             = "CancelJob"
	RouteCreateSchedule        = "CreateSchedule"
	RouteListSchedules         = "ListSchedules"
	RouteGetSchedule           = "GetSchedule"
	RouteDeleteSchedule        = "DeleteSchedule"
	RouteAdminListJobs         = "AdminListJobs"
	RouteAdminGetJob           = "AdminGetJob"
	RouteAdminCounts           = "AdminCounts"
	RouteAdminJobAction        = "AdminJobAction"
	RouteAdminDeadLetters      = "AdminDeadLetters"
	RouteAdminDeadLetterAction = "AdminDeadLetterAction"
	RoutePause                 = "Pause"
	RouteResume                = "Resume"
	RouteListPauses            = "ListPauses"
	RouteAdminPause            = "AdminPause"
	RouteAdminResume           = "AdminResume"
	RouteAdminListPauses       = "AdminListPauses"
	RouteScheduleAction        = "ScheduleAction"
	RouteAdminScheduleAction   = "AdminScheduleAction"
	RouteSignalJob             = "SignalJob"
	RouteAdminSignalJob        = "AdminSignalJob"
	RouteCallback              = "Callback"
	RouteStartUpload           = "StartUpload"
	RouteCompleteUpload        = "CompleteUpload"
	RouteGetUpload             = "GetUpload"
)

// Routes are the API's routes: the one place a path is written.
var Routes = []Route{
	{RouteEnqueue, "POST", "/v1/jobs", Enqueue, AuthCaller},
	{RouteGetJob, "GET", "/v1/jobs/{id}", GetJob, AuthCaller},
	// A wait holds its instance for up to 20 s: a function of its own,
	// with reserved concurrency, so waits never starve the reads.
	{RouteWaitJob, "GET", "/v1/jobs/{id}/wait", WaitJob, AuthCaller},
	{RouteListJobs, "GET", "/v1/jobs", GetJob, AuthCaller},
	{RouteCounts, "GET", "/v1/counts", GetJob, AuthCaller},
	{RouteListKinds, "GET", "/v1/kinds", GetJob, AuthCaller},
	{RouteRetryJob, "POST", "/v1/jobs/{id}/retry", Cancel, AuthCaller},
	{RouteReplayJob, "POST", "/v1/jobs/{id}/replay", Enqueue, AuthCaller},
	{RouteBulkAction, "POST", "/v1/bulk/{action}", Cancel, AuthCaller},
	{RouteEnqueueBatch, "POST", "/v1/batches", Enqueue, AuthCaller},
	{RouteGetBatch, "GET", "/v1/batches/{id}", GetJob, AuthCaller},
	{RouteCancelJob, "POST", "/v1/jobs/{id}/cancel", Cancel, AuthCaller},
	{RouteCreateSchedule, "POST", "/v1/schedules", Schedules, AuthCaller},
	{RouteListSchedules, "GET", "/v1/schedules", Schedules, AuthCaller},
	{RouteGetSchedule, "GET", "/v1/schedules/{name}", Schedules, AuthCaller},
	{RouteDeleteSchedule, "DELETE", "/v1/schedules/{name}", Schedules, AuthCaller},
	{RouteAdminListJobs, "GET", "/v1/admin/jobs", GetJob, AuthOperator},
	{RouteAdminGetJob, "GET", "/v1/admin/jobs/{id}", GetJob, AuthOperator},
	{RouteAdminCounts, "GET", "/v1/admin/counts", GetJob, AuthOperator},
	{RouteAdminJobAction, "POST", "/v1/admin/jobs/{id}/{action}", Cancel, AuthOperator},
	{RouteAdminDeadLetters, "GET", "/v1/admin/dead-letters", Cancel, AuthOperator},
	{RouteAdminDeadLetterAction, "POST", "/v1/admin/dead-letters/{action}", Cancel, AuthOperator},
	{RoutePause, "POST", "/v1/pauses", Cancel, AuthCaller},
	{RouteResume, "POST", "/v1/pauses/resume", Cancel, AuthCaller},
	{RouteListPauses, "GET", "/v1/pauses", GetJob, AuthCaller},
	{RouteAdminPause, "POST", "/v1/admin/pauses", Cancel, AuthOperator},
	{RouteAdminResume, "POST", "/v1/admin/pauses/resume", Cancel, AuthOperator},
	{RouteAdminListPauses, "GET", "/v1/admin/pauses", GetJob, AuthOperator},
	{RouteScheduleAction, "POST", "/v1/schedules/{name}/{action}", Enqueue, AuthCaller},
	{RouteAdminScheduleAction, "POST", "/v1/admin/schedules/{name}/{action}", Enqueue, AuthOperator},
	// Signals are sealed as they are stored: served by the function
	// that holds the payload key ring.
	{RouteSignalJob, "POST", "/v1/jobs/{id}/signals/{name}", Enqueue, AuthCaller},
	{RouteAdminSignalJob, "POST", "/v1/admin/jobs/{id}/signals/{name}", Enqueue, AuthOperator},
	{RouteCallback, "POST", "/v1/callbacks/{token}", Enqueue, AuthNone},
	// An upload begins a multipart upload and is stored as a job; its
	// completion is a signal, sealed: both with the enqueue function.
	{RouteStartUpload, "POST", "/v1/uploads", Enqueue, AuthCaller},
	{RouteCompleteUpload, "POST", "/v1/uploads/{id}/complete", Enqueue, AuthCaller},
	{RouteGetUpload, "GET", "/v1/uploads/{id}", GetJob, AuthCaller},
}

// functionsServing are the functions that serve a route of auth, each
// once, in the routes' order.
func functionsServing(auth Auth) []string {
	var out []string
	for _, r := range Routes {
		if r.Auth == auth && !slices.Contains(out, r.Function) {
			out = append(out, r.Function)
		}
	}
	return out
}

// RouteByID returns the route named id.
func RouteByID(id string) (Route, bool) {
	for _, r := range Routes {
		if r.ID == id {
			return r, true
		}
	}
	return Route{}, false
}

// PathOf is the path of the route named id with params (Route.PathFor);
// an id the table does not have is an error.
func PathOf(id string, params map[string]string) (string, error) {
	r, ok := RouteByID(id)
	if !ok {
		return "", fmt.Errorf("deploy: no route %q", id)
	}
	return r.PathFor(params)
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
