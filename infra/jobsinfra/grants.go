package jobsinfra

import (
	"fmt"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// This file is the one place where a role's actions become statements:
// each role's grants are internal/deploy's (deploy.Grants), and each
// symbolic resource they name becomes the construct's ARNs here (arns).
// No other file of the construct writes an action of a function's role, of
// Scheduler's role or of GrantEnqueue and GrantReadJobs
// (TestRoleActionsAreWrittenOnlyInTheDescriptor).

// grantee is a role the descriptor's grants are given to: the principal,
// which of deploy.Grants it gets, the lane whose queue is its own (a
// lane's worker; "" otherwise) and its function's own log group (nil for a
// role without one of the construct's: no logs grant).
type grantee struct {
	principal awsiam.IGrantable
	role      string
	lane      string
	logs      awslogs.ILogGroup
}

// functionGrantee is one of the construct's functions (or lane's workers)
// as a grantee of role's grants.
func functionGrantee(fn awslambda.Function, role, lane string) grantee {
	return grantee{principal: fn, role: role, lane: lane, logs: fn.LogGroup()}
}

// grantRoles gives each function of the deployment, every lane's worker
// included, the grants the descriptor lists for it.
func (s *Jobs) grantRoles() {
	for _, name := range FunctionNames {
		if name != deploy.Worker {
			s.grant(functionGrantee(s.Functions[name], name, ""))
		}
	}
	for _, name := range s.laneOrder {
		s.grant(functionGrantee(s.Lanes[name].Worker, deploy.Worker, name))
	}
}

// grant gives g.principal every grant of g.role the construct adds (those
// By the event source or tracing are CDK's, which the construct tests
// check), each on the ARNs its resource stands for, and names it in the
// resource policies that list who may act: the queues' known senders, a
// secret's readers, the bus's publishers. The Grant holds the statements
// added; nil if none.
func (s *Jobs) grant(g grantee) awsiam.Grant {
	var out []awsiam.Grant
	for _, d := range deploy.Grants(g.role) {
		if d.By != "" {
			s.explain(g, d)
			continue
		}
		arns := s.arns(d.Resource, g)
		if len(arns) == 0 || d.Resource == deploy.Key && d.Condition.Via == "s3" && s.Parts == nil {
			continue // no such resource here; the key's use through S3 needs the bucket
		}
		out = append(out, awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: g.principal, Actions: jsii.Strings(d.Actions...), ResourceArns: &arns, Conditions: s.conditions(d.Condition),
		}))
		s.explain(g, d)
		for _, a := range d.Actions {
			if list := s.listing(a, d.Resource); list != nil {
				list.add(principalARN(g.principal, "the grants of "+g.role))
			}
		}
	}
	return combine(out...)
}

// explain tells cdk-nag why a grant of one of the construct's functions
// has a wildcard resource (AwsSolutions-IAM5), once its statement is in
// the role's policy.
func (s *Jobs) explain(g grantee, d deploy.Grant) {
	fn, ok := g.principal.(awslambda.Function)
	if !ok || g.logs == nil {
		return
	}
	var why string
	var appliesTo any
	switch {
	case d.Resource == deploy.OwnLogs:
		why = "Lambda names its log streams at run time; the wildcard covers only the streams of this " +
			"function's own log group, in place of the managed AWSLambdaBasicExecutionRole."
		appliesTo = jsii.String("Resource::<" + *awscdk.Stack_Of(s.Construct).GetLogicalId(g.logs.Node().DefaultChild().(awscdk.CfnElement)) + ".Arn>:*")
	case d.Resource == deploy.Anything && d.By == deploy.ByTracing && s.cfg.Tracing:
		why = "X-Ray's xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level " +
			"permissions; Lambda's active tracing needs them on '*'."
		appliesTo = jsii.String("Resource::*")
	case d.Resource == deploy.Parts:
		why = "Payload and result objects are named by their job's id at run time; the wildcard covers only the parts/ prefix of the construct's own bucket."
		appliesTo = jsii.String("Resource::<" + *awscdk.Stack_Of(s.Construct).GetLogicalId(s.Parts.Node().DefaultChild().(awscdk.CfnElement)) + ".Arn>/" + partsPrefix + "*")
	case d.Resource == deploy.Uploads:
		why = "Uploads are named by their upload's id at run time; the wildcard covers only the uploads/ prefix of the construct's own bucket."
		appliesTo = jsii.String("Resource::<" + *awscdk.Stack_Of(s.Construct).GetLogicalId(s.Parts.Node().DefaultChild().(awscdk.CfnElement)) + ".Arn>/" + uploadsPrefix + "*")
	case d.Resource == deploy.RuntimeSchedules:
		why = "The schedules function creates, reads, updates and deletes the callers' schedules, whose names are only known at run time, " +
			"in the runtime schedule group alone (not the declared schedules' group)."
		// The account and region are tokens, or literals in a pinned stack.
		appliesTo = &cdknag.RegexAppliesTo{
			Regex: jsii.String(`/^Resource::arn:<AWS::Partition>:scheduler:.+:schedule\/` + regexp.QuoteMeta(s.Names.RuntimeScheduleGroup) + `\/\*$/g`),
		}
	default:
		return
	}
	cdknag.NagSuppressions_AddResourceSuppressions(fn.Role(), &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(why), AppliesTo: &[]any{appliesTo},
	}}, jsii.Bool(true))
}

// listing is the list of principals a resource's policy admits to action
// on resource, nil if none.
func (s *Jobs) listing(action string, resource deploy.Resource) *principals {
	switch {
	case action == "sqs:SendMessage" && (resource == deploy.Queues || resource == deploy.DefaultQueue):
		return s.senders
	case action == "secretsmanager:GetSecretValue" && resource == deploy.PayloadSecret:
		return s.payloadReaders
	case action == "secretsmanager:GetSecretValue" && resource == deploy.PageSecret:
		return s.pageReaders
	case action == "events:PutEvents" && resource == deploy.Bus:
		return s.publishers
	case action == "s3:GetObject" && resource == deploy.Parts:
		return s.partUsers
	}
	return nil
}

// arns are the ARNs resource r stands for in this deployment, for g; none
// when the deployment does not have it (the key without
// Config.CustomerManagedKey, X-Ray without tracing, the logs of a role
// without a log group of the construct's). A resource the descriptor names
// and this does not know panics: it is a construct's defect.
func (s *Jobs) arns(r deploy.Resource, g grantee) []*string {
	if name, ok := r.IndexName(); ok {
		if !isIndex(name) {
			panic(fmt.Sprintf("jobsinfra: the descriptor names the index %q, which the table does not have", name))
		}
		return []*string{s.tableIndex(name)}
	}
	switch r {
	case deploy.Table:
		return []*string{s.Table.TableArn()}
	case deploy.Queues:
		return *s.queueARNs()
	case deploy.DefaultQueue:
		return []*string{s.Queue.QueueArn()}
	case deploy.OwnQueue:
		return []*string{s.Lanes[g.lane].Queue.QueueArn()}
	case deploy.DLQs:
		var out []*string
		for _, name := range s.laneOrder {
			out = append(out, s.Lanes[name].DLQ.QueueArn())
		}
		return out
	case deploy.ScheduleDLQ:
		return []*string{s.ScheduleDLQ.QueueArn()}
	case deploy.Bus:
		return []*string{s.EventBus.EventBusArn()}
	case deploy.RuntimeSchedules:
		return []*string{s.scheduleARN("schedule", s.Names.RuntimeScheduleGroup+"/*")}
	case deploy.SchedulerRole:
		return []*string{s.SchedulerRole.RoleArn()}
	case deploy.PayloadSecret:
		return []*string{s.payloadSecret.SecretArn()}
	case deploy.PageSecret:
		return []*string{s.pageSecret.SecretArn()}
	case deploy.Key:
		if s.Key == nil {
			return nil
		}
		return []*string{s.Key.KeyArn()}
	case deploy.Bucket:
		if s.Parts == nil {
			return nil
		}
		return []*string{s.Parts.BucketArn()}
	case deploy.Parts:
		if s.Parts == nil {
			return nil
		}
		return []*string{jsii.String(*s.Parts.BucketArn() + "/" + partsPrefix + "*")}
	case deploy.Uploads:
		if s.Parts == nil {
			return nil
		}
		return []*string{jsii.String(*s.Parts.BucketArn() + "/" + uploadsPrefix + "*")}
	case deploy.OwnLogs:
		if g.logs == nil {
			return nil
		}
		return []*string{jsii.String(*g.logs.LogGroupArn() + ":*")}
	case deploy.Anything:
		return nil // only X-Ray's, which Lambda's active tracing grants
	}
	panic(fmt.Sprintf("jobsinfra: the descriptor names the resource %q, which the construct does not map", r))
}

// conditions are the statement's conditions for c (nil for none).
func (s *Jobs) conditions(c deploy.Condition) *map[string]*map[string]any {
	eq := map[string]any{}
	if c.Via != "" {
		// Only through the service that holds the data and calls KMS with
		// the role's identity, and only for this account's calls: a role
		// calling KMS directly, to decrypt a blob it copied, is refused.
		eq["kms:ViaService"] = s.viaService(c.Via)
		eq["kms:CallerAccount"] = awscdk.Stack_Of(s.Construct).Account()
	}
	if c.PassedTo != "" {
		eq["iam:PassedToService"] = c.PassedTo
	}
	if len(eq) == 0 {
		return nil
	}
	return &map[string]*map[string]any{"StringEquals": &eq}
}

// isIndex reports whether the table has the index name (dynamostore's one
// definition).
func isIndex(name string) bool {
	for _, gsi := range dynamostore.CreateTableInput("").GlobalSecondaryIndexes {
		if gsi.IndexName != nil && *gsi.IndexName == name {
			return true
		}
	}
	return false
}
