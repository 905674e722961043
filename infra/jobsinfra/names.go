package jobsinfra

import (
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Names are a deployment's explicit physical names: the few a template
// must spell (EventBridge Scheduler's groups, which the schedules function
// and the scheduler role's policies name; the dashboard; the HTTP API's
// name) and the metric namespace the functions, the alarms and the
// dashboard share. Every other resource (table, queues, functions, roles,
// log groups, secrets, alarms, topic) is named by CloudFormation after the
// stack and the construct path.
//
// They all derive from one base: Config.NamePrefix when set, otherwise a
// name made of the stack's name and the construct's path with a hash of
// the path (awscdk.Names_UniqueResourceName, at most nameBaseMaxLength
// characters, letters, digits and '-'), such as
// "orders-prod-Jobs-C19DB740". Two stacks (or two constructs in one
// stack) never share a base, so two deployments that both call their
// environment "prod" share an account and region without a collision.
type Names struct {
	// ScheduleGroup holds the declared schedules (JobsProps.Schedules):
	// the base.
	ScheduleGroup string
	// RuntimeScheduleGroup holds the schedules callers create through the
	// API (POST /v1/schedules): the base + "-runtime". The schedules
	// function is told it in JOBS_SCHEDULE_GROUP.
	RuntimeScheduleGroup string
	// Dashboard is the CloudWatch dashboard's name, and API the HTTP API's:
	// the base.
	Dashboard, API string
	// MetricsNamespace holds the functions' metrics (Embedded Metric
	// Format), which the alarms and the dashboard read: "lambdajobs/" +
	// the base. The functions are told it in JOBS_METRICS_NAMESPACE.
	MetricsNamespace string
	// EventBus is the job events' bus when the construct creates it: the
	// base + "-events".
	EventBus string
}

// The limits the base must keep for every name made of it: a schedule
// group's name is at most 64 characters of [0-9A-Za-z_.-], with
// "-runtime" appended for the runtime group; a dashboard's name allows
// only [A-Za-z0-9_-] (no '.'); a metric namespace (255) and an HTTP
// API's name (128) are longer.
const (
	runtimeGroupSuffix = "-runtime"
	nameBaseMaxLength  = 64 - len(runtimeGroupSuffix)
)

var namePrefix = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

// names derives a construct's Names from prefix, or from its stack and
// path.
func names(c constructs.Construct, prefix string) Names {
	base := prefix
	if base == "" {
		base = *awscdk.Names_UniqueResourceName(c, &awscdk.UniqueResourceNameOptions{
			MaxLength:                jsii.Number(float64(nameBaseMaxLength)),
			Separator:                jsii.String("-"),
			AllowedSpecialCharacters: jsii.String("-"),
		})
	}
	return Names{
		ScheduleGroup:        base,
		RuntimeScheduleGroup: base + runtimeGroupSuffix,
		Dashboard:            base,
		API:                  base,
		MetricsNamespace:     "lambdajobs/" + base,
		EventBus:             base + "-events",
	}
}
