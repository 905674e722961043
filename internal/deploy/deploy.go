// Package deploy describes the deployment once: its functions (with their
// memory and timeout), the API's routes and the function that serves
// each, and the environment each function reads, with each variable's
// type, default, parser and readers. Every part that needs one of these
// facts reads it from here: the HTTP routing (httpapi), the CDK construct
// (jobsinfra: functions, their sizes and environments, routes, grants,
// reserved variables), the local stack (its gateway, its functions and
// their environment), lambdafn (ConfigFromEnv reads each variable through
// its Setting), the Makefile (functions.mk) and the documentation's
// tables, which a test renders from here and compares
// (docs/reference/CONFIGURATION.md, docs/reference/openapi.yaml).
//
// No other Go file of the repository writes a JOBS_ variable's name:
// TestNoVariableNameOutsideTheDescriptor parses them all.
package deploy

import (
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// The functions. A one-main bootstrap (lambdafn.Serve) learns which it is
// from JOBS_FUNCTION.
const (
	Enqueue   = "enqueue"
	GetJob    = "getjob"
	WaitJob   = "waitjob"
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
	// MemoryMB and Timeout are its size by default (the construct's
	// development preset, jobsinfra.DevConfig).
	MemoryMB int
	Timeout  time.Duration
}

// Functions are the deployment's functions, in the order the docs list
// them.
var Functions = []Function{
	{Name: Enqueue, Doc: "POST /v1/jobs and /v1/batches: validate, store as queued, send the reference", API: true, MemoryMB: 256, Timeout: 10 * time.Second},
	{Name: GetJob, Doc: "the reads: a job, the caller's jobs, counts, a batch, and the operators' reads", API: true, MemoryMB: 256, Timeout: 10 * time.Second},
	{Name: WaitJob, Doc: "GET /v1/jobs/{id}/wait: a job, once it changes; reserved concurrency of its own (Config.WaitConcurrency)", API: true, MemoryMB: 128, Timeout: jobs.MaxWait + 5*time.Second},
	{Name: Cancel, Doc: "the writes on existing jobs: cancel, retry, bulk actions, and the operators' actions and dead letters", API: true, MemoryMB: 256, Timeout: 10 * time.Second},
	{Name: Worker, Doc: "the SQS event source's target: claims, runs and settles jobs; turns foreign messages and schedule fires into jobs", MemoryMB: 512, Timeout: 60 * time.Second},
	{Name: Sweeper, Doc: "every minute (EventBridge): settles jobs nobody else will", MemoryMB: 256, Timeout: 60 * time.Second},
	{Name: Schedules, Doc: "POST/GET/DELETE /v1/schedules: the callers' runtime schedules in EventBridge Scheduler", API: true, MemoryMB: 256, Timeout: 10 * time.Second},
}

// FunctionNames are the functions' names, in order.
func FunctionNames() []string {
	out := make([]string, len(Functions))
	for i, f := range Functions {
		out[i] = f.Name
	}
	return out
}

// FunctionNamed returns the function called name.
func FunctionNamed(name string) (Function, bool) {
	for _, f := range Functions {
		if f.Name == name {
			return f, true
		}
	}
	return Function{}, false
}

// FunctionsMakefile renders the functions as functions.mk, which the
// Makefile includes (its builds loop over FUNCTIONS).
func FunctionsMakefile() string {
	return "# Generated from internal/deploy (UPDATE_DOCS=1 go test ./internal/deploy): the deployment's functions.\n" +
		"FUNCTIONS := " + strings.Join(FunctionNames(), " ") + "\n"
}
