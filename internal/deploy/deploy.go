// Package deploy describes the deployment once: its functions, the API's
// routes and the function that serves each, and the environment each
// function reads, with its default and meaning. Every part that needs one
// of these facts reads it from here: the HTTP routing (httpapi), the CDK
// construct (jobsinfra: functions, routes, grants, reserved variables),
// the local stack (its gateway and the functions' environment), lambdafn
// (what it reads) and the documentation's tables, which a test renders
// from here and compares (docs/CONFIGURATION.md, docs/openapi.yaml).
package deploy

// The functions. A one-main bootstrap (lambdafn.Serve) learns which it is
// from JOBS_FUNCTION.
const (
	Enqueue   = "enqueue"
	GetJob    = "getjob"
	Cancel    = "cancel"
	Worker    = "worker"
	Sweeper   = "sweeper"
	Schedules = "schedules"
)

// Function is one Lambda function of the deployment.
type Function struct {
	Name string
	// Doc says what it serves.
	Doc string
	// API is set for the functions behind API Gateway.
	API bool
}

// Functions are the deployment's functions, in the order the docs list
// them.
var Functions = []Function{
	{Enqueue, "POST /v1/jobs and /v1/batches: validate, store as queued, send the reference", true},
	{GetJob, "the reads: a job, the caller's jobs, counts, a batch, and the operators' reads", true},
	{Cancel, "the writes on existing jobs: cancel, retry, bulk actions, and the operators' actions and dead letters", true},
	{Worker, "the SQS event source's target: claims, runs and settles jobs; turns foreign messages and schedule fires into jobs", false},
	{Sweeper, "every minute (EventBridge): settles jobs nobody else will", false},
	{Schedules, "POST/GET/DELETE /v1/schedules: the callers' runtime schedules in EventBridge Scheduler", true},
}

// FunctionNames are the functions' names, in order.
func FunctionNames() []string {
	out := make([]string, len(Functions))
	for i, f := range Functions {
		out[i] = f.Name
	}
	return out
}
