package jobsinfra

import (
	"regexp"
)

// route is one of the API's routes: its key's method and path, the
// function that serves it, and whether only operators may call it.
type route struct {
	id, method, path, function string
	admin                      bool
}

// key is the route key, as API Gateway and JWTConfig.Scopes name it.
func (r route) key() string { return r.method + " " + r.path }

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// arnPath is the path as an execute-api ARN matches it: each {param}
// matches any one value.
func (r route) arnPath() string { return pathParam.ReplaceAllString(r.path, "*") }

// routes are the API's routes, in one table: the construct creates them,
// grants them (GrantInvoke, GrantOperate) and lists them in RouteKeys.
var routes = []route{
	{"Enqueue", "POST", "/v1/jobs", "enqueue", false},
	{"GetJob", "GET", "/v1/jobs/{id}", "getjob", false},
	{"ListJobs", "GET", "/v1/jobs", "getjob", false},
	{"Counts", "GET", "/v1/counts", "getjob", false},
	{"RetryJob", "POST", "/v1/jobs/{id}/retry", "cancel", false},
	{"BulkAction", "POST", "/v1/bulk/{action}", "cancel", false},
	{"EnqueueBatch", "POST", "/v1/batches", "enqueue", false},
	{"GetBatch", "GET", "/v1/batches/{id}", "getjob", false},
	{"CancelJob", "POST", "/v1/jobs/{id}/cancel", "cancel", false},
	{"CreateSchedule", "POST", "/v1/schedules", "schedules", false},
	{"ListSchedules", "GET", "/v1/schedules", "schedules", false},
	{"GetSchedule", "GET", "/v1/schedules/{name}", "schedules", false},
	{"DeleteSchedule", "DELETE", "/v1/schedules/{name}", "schedules", false},
	{"AdminListJobs", "GET", "/v1/admin/jobs", "getjob", true},
	{"AdminGetJob", "GET", "/v1/admin/jobs/{id}", "getjob", true},
	{"AdminCounts", "GET", "/v1/admin/counts", "getjob", true},
	{"AdminJobAction", "POST", "/v1/admin/jobs/{id}/{action}", "cancel", true},
	{"AdminDeadLetters", "GET", "/v1/admin/dead-letters", "cancel", true},
	{"AdminDeadLetterAction", "POST", "/v1/admin/dead-letters/{action}", "cancel", true},
}

// RouteKeys are the API's routes, as JWTConfig.Scopes names them.
var RouteKeys = func() []string {
	keys := make([]string, len(routes))
	for i, r := range routes {
		keys[i] = r.key()
	}
	return keys
}()
