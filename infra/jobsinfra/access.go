package jobsinfra

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// principals is a list of principal ARNs filled until synthesis: the
// queue's known senders, a secret's readers, the operators. The grant that
// gives a principal an action also puts it in the list the resource's
// policy checks, so the two cannot disagree.
type principals struct{ arns []*string }

func (l *principals) Produce() *[]*string { return &l.arns }

func (l *principals) add(arn *string) { l.arns = append(l.arns, arn) }

// list is the list as a token the template resolves at synthesis.
func (l *principals) list() *[]*string { return awscdk.Lazy_List(l, nil) }

// joined is the list comma-separated (an environment variable's value).
type joined struct{ l *principals }

func (j *joined) Produce() *string {
	parts := make([]string, len(j.l.arns))
	for i, a := range j.l.arns {
		parts[i] = *a
	}
	return jsii.String(strings.Join(parts, ","))
}

// combine is the grants (nil ones left out) as one; nil if all are.
func combine(grants ...awsiam.Grant) awsiam.Grant {
	var out awsiam.Grant
	for _, g := range grants {
		switch {
		case g == nil:
		case out == nil:
			out = g
		default:
			out = out.Combine(g)
		}
	}
	return out
}

// onlyReaders denies reading secret's value to every principal but its
// readers (the functions granted it, and Config.KeyAdmins): no person of
// the account reads a key by accident of a broad policy of theirs.
func (s *Jobs) onlyReaders(secret awssecretsmanager.Secret, readers *principals) {
	for _, arn := range s.cfg.KeyAdmins {
		readers.add(jsii.String(arn))
	}
	secret.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyItsReaders"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("secretsmanager:GetSecretValue"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"ArnNotLike": map[string]any{"aws:PrincipalArn": readers.list()}},
	}))
}

// GrantReadJobs lets grantee read jobs and batches straight from the table
// (dynamodb:GetItem on it, nothing else, and kms:Decrypt through DynamoDB
// with a customer-managed key): for an operator's role or a reporting
// function. Owners are not checked on this path; the HTTP API is the
// owner-checked way to read. The Grant holds the statements added.
func (s *Jobs) GrantReadJobs(principal awsiam.IGrantable) awsiam.Grant {
	// Not Table.Grant: it adds the table's indexes with a wildcard.
	return s.grant(grantee{principal: principal, role: deploy.Reader})
}

// GrantEnqueue lets another function enqueue jobs directly from Go
// (lambdafn.NewService in its own code: Enqueue, EnqueueBatch, or Prepare
// + TransactPut + Dispatch inside its own DynamoDB transaction). It grants
// exactly what the construct's enqueue function does on the jobs table
// (dynamodb:PutItem for a job; UpdateItem, GetItem and BatchGetItem for a
// batch) and sqs:SendMessage on every lane's queue (and makes the function
// one of the queues' known senders), secretsmanager:GetSecretValue on the
// payload key ring, and tells the function the environment lambdafn.NewService
// reads (internal/deploy's ServiceVars) with the values the construct's
// own enqueue function has: the table, the queues, the dispatch graces,
// the retention, the key ring's secret and which kinds announce their
// outcomes (JOBS_EVENTS), so its jobs are stored, sent, sealed and
// announced as the enqueue function's are. The function's own items in
// the same transaction need their own grants.
//
// It takes an awslambda.Function, not an awsiam.IGrantable, because it
// also sets the function's environment (AddEnvironment) and names its role
// among the queue's known senders. The Grant it returns holds the
// statements added to the function's role (the table's actions, the
// queries that count queued jobs for the kinds' caps, sqs:SendMessage, secretsmanager:GetSecretValue, and the key's uses with
// a customer-managed key); the environment and the queue policy's list of
// senders are not part of it.
//
// It is a full-trust grant: table writes are not limited to the
// function's own jobs (DynamoDB cannot scope a PutItem to an owner), and
// the payload key ring opens every jobs:"secret" field of every owner. A
// function given it can make any job as any owner, of any kind (internal
// ones included), in any lane and for any tenant, and read every sealed
// payload it can read from the table. Give it only to code you trust as
// you trust the construct's own enqueue function; untrusted producers
// enqueue over the API (GrantInvoke), where the caller is the owner.
func (s *Jobs) GrantEnqueue(fn awslambda.Function) awsiam.Grant {
	// The enqueue function's grants (internal/deploy), but its logs.
	g := s.grant(grantee{principal: fn, role: deploy.Enqueue})
	told := s.values.For(deploy.Enqueue, jsii.String(deploy.Enqueue))
	for _, v := range deploy.ServiceVars {
		if x, ok := told[v.Name]; ok {
			fn.AddEnvironment(jsii.String(v.Name), x, nil)
		}
	}
	return g
}

// callerRoutes are the API's routes for callers: those whose auth is
// deploy.AuthCaller (all but the operators').
func callerRoutes() []deploy.Route {
	var out []deploy.Route
	for _, r := range routes {
		if r.Auth == deploy.AuthCaller {
			out = append(out, r)
		}
	}
	return out
}

// GrantInvoke lets grantee call the API's routes for callers, each of
// which acts on the caller's own jobs and schedules: execute-api:Invoke on
// exactly those routes (not the operators' /v1/admin routes). With an IAM
// authorizer only (a JWT authorizer checks tokens, not IAM).
func (s *Jobs) GrantInvoke(grantee awsiam.IGrantable) awsiam.Grant {
	return s.grantRoutes(grantee, callerRoutes())
}

// GrantOperate makes role an operator: execute-api:Invoke on every route,
// the operators' /v1/admin routes included (any owner's jobs, and the
// dead-letter queue), and its sessions among the operators the API
// accepts there (as Config.Operators does).
func (s *Jobs) GrantOperate(role awsiam.IRole) awsiam.Grant {
	s.operators.add(role.RoleArn())
	return s.grantRoutes(role, routes)
}

func (s *Jobs) grantRoutes(grantee awsiam.IGrantable, list []deploy.Route) awsiam.Grant {
	if s.cfg.JWT != nil {
		panic("jobsinfra: GrantInvoke and GrantOperate grant IAM permissions; this API authorizes callers with JWTs (Config.JWT): give their tokens scopes instead")
	}
	arns := make([]*string, len(list))
	for i, r := range list {
		arns[i] = s.API.ArnForExecuteApi(jsii.String(r.Method), jsii.String(r.ARNPath()), jsii.String("*"))
	}
	return awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: grantee, Actions: jsii.Strings("execute-api:Invoke"), ResourceArns: &arns,
	})
}

// viaService is the name a service calls KMS as in this stack's region
// (kms:ViaService), such as sqs.us-east-1.amazonaws.com.
func (s *Jobs) viaService(service string) *string {
	stack := awscdk.Stack_Of(s.Construct)
	return jsii.String(service + "." + *stack.Region() + "." + *stack.UrlSuffix())
}

// tableIndex is the ARN of one of the table's indexes.
func (s *Jobs) tableIndex(name string) *string {
	return jsii.String(*s.Table.TableArn() + "/index/" + name)
}
