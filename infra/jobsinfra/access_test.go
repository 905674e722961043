package jobsinfra

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

func TestNoWildcardActionsAndLeastPrivilege(t *testing.T) {
	for name, s := range environments(t) {
		perRole := map[string][]string{}
		for id, pol := range s.resources("AWS::IAM::Policy") {
			doc := props(pol)["PolicyDocument"].(map[string]any)
			for _, st := range doc["Statement"].([]any) {
				stmt := st.(map[string]any)
				actions := stmt["Action"]
				list, ok := actions.([]any)
				if !ok {
					list = []any{actions}
				}
				for _, a := range list {
					if strings.Contains(a.(string), "*") {
						t.Errorf("%s: policy %s allows %q", name, id, a)
					}
					for _, role := range props(pol)["Roles"].([]any) {
						ref := role.(map[string]any)["Ref"].(string)
						perRole[ref] = append(perRole[ref], a.(string))
					}
				}
			}
		}
		want := map[string]string{
			// enqueue also counts queued jobs for the caps (Query of two
			// indexes: TestListingIndexesAndGrants says which).
			"enqueue": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:PutItem dynamodb:Query dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents secretsmanager:GetSecretValue sqs:SendMessage",
			// getjob also lists (Query the listing indexes, BatchGetItem the
			// jobs) and reads the page token key; cancel also retries.
			"getjob": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:Query logs:CreateLogStream logs:PutLogEvents secretsmanager:GetSecretValue",
			// ...and ends a batch whose last job it cancels (PutItem: the
			// completion job), and serves the operators' dead-letter routes.
			"cancel": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:PutItem dynamodb:Query dynamodb:UpdateItem events:PutEvents logs:CreateLogStream logs:PutLogEvents " +
				"secretsmanager:GetSecretValue sqs:ChangeMessageVisibility sqs:DeleteMessage sqs:GetQueueAttributes sqs:ReceiveMessage sqs:SendMessage",
			// The three that write outcomes send their job events.
			"sweeper": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:PutItem dynamodb:Query dynamodb:UpdateItem events:PutEvents logs:CreateLogStream logs:PutLogEvents sqs:ChangeMessageVisibility sqs:DeleteMessage sqs:ReceiveMessage sqs:SendMessage",
			// The worker also counts queued jobs for its handlers' children's
			// caps (Kind.EnqueueChild: Query of the same two indexes).
			"worker": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:PutItem dynamodb:Query dynamodb:UpdateItem events:PutEvents logs:CreateLogStream logs:PutLogEvents secretsmanager:GetSecretValue " +
				"sqs:ChangeMessageVisibility sqs:DeleteMessage sqs:GetQueueAttributes sqs:GetQueueUrl sqs:ReceiveMessage sqs:SendMessage",
		}
		for fn, actions := range want {
			role := s.function(t, fn)["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
			if s.cfg.Tracing { // X-Ray's writes, which take no resource (see TestTracing)
				actions += " xray:PutTelemetryRecords xray:PutTraceSegments"
			}
			if s.cfg.CustomerManagedKey { // the key's uses (see TestCustomerManagedKey)
				uses := []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}
				if fn == "getjob" { // reads only
					uses = []string{"kms:Decrypt"}
				}
				actions = dedupe(append(strings.Fields(actions), uses...))
			}
			got := dedupe(perRole[role])
			if got != actions {
				t.Errorf("%s %s: actions\n  %s\nwant\n  %s", name, fn, got, actions)
			}
		}
		for id, role := range s.resources("AWS::IAM::Role") {
			if managed := props(role)["ManagedPolicyArns"]; managed != nil && !strings.Contains(id, "BucketNotificationsHandler") && !strings.HasPrefix(id, customResourceProvider) && !strings.HasPrefix(id, "Orders") {
				t.Errorf("%s: role %s has managed policies %v", name, id, managed)
			}
		}
	}
}

func dedupe(actions []string) string {
	seen := map[string]bool{}
	var out []string
	for _, a := range actions {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func TestGrantEnqueue(t *testing.T) {
	s := environments(t)["sources"]
	var fn map[string]any
	for _, f := range s.resources("AWS::Lambda::Function") {
		if props(f)["Description"] == "orders service" {
			fn = props(f)
		}
	}
	if fn == nil {
		t.Fatal("no orders function")
	}
	vars := jsonString(fn["Environment"])
	for _, v := range []string{"JOBS_TABLE", "JOBS_QUEUE_URL", "JOBS_DISPATCH_GRACE", "JOBS_RETENTION", "JOBS_EVENTS", "JOBS_PAYLOAD_KEYRING_SECRET"} {
		if !strings.Contains(vars, v) {
			t.Errorf("orders function lacks %s: %s", v, vars)
		}
	}
	role := fn["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
	var actions []string
	for _, pol := range s.resources("AWS::IAM::Policy") {
		if !strings.Contains(jsonString(props(pol)["Roles"]), role) {
			continue
		}
		for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			actions = append(actions, jsonString(st.(map[string]any)["Action"]))
		}
	}
	if got := strings.Join(actions, " "); got != `["dynamodb:BatchGetItem","dynamodb:GetItem","dynamodb:PutItem","dynamodb:UpdateItem"] "dynamodb:Query" "sqs:SendMessage" "secretsmanager:GetSecretValue"` {
		t.Errorf("orders function may %s, want exactly the enqueue function's table actions (jobs and batches), its counts of queued jobs (caps), SendMessage and reading the key ring", got)
	}
}

// A function given GrantEnqueue is told every variable lambdafn.NewService
// reads (deploy.ServiceVars) that the construct tells its own enqueue
// function, with the same value: its jobs are stored, sent to their lanes,
// swept, sealed, kept and announced as the enqueue function's are. The
// stack has lanes, a retention and JOBS_EVENTS=all away from their
// defaults, so a variable left out or set otherwise shows.
func TestGrantEnqueueTellsWhatTheEnqueueFunctionIsTold(t *testing.T) {
	cfg := DevConfig("granted")
	cfg.AllEvents = true
	cfg.Retention = 30 * 24 * time.Hour
	app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(t), Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("lambdajobs-granted"), nil)
	j := NewJobs(stack, "Jobs", &JobsProps{Config: cfg, Bootstraps: fakeBootstraps(t), Lanes: []string{LaneUrgent}})
	orders := awslambda.NewFunction(stack, jsii.String("Orders"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"),
		Code: awslambda.Code_FromAsset(jsii.String(j.asset("enqueue")), nil),
	})
	j.GrantEnqueue(orders)
	resources := (*assertions.Template_FromStack(stack, nil).ToJSON())["Resources"].(map[string]any)
	envOf := func(fn awslambda.Function) map[string]any {
		id := *stack.GetLogicalId(fn.Node().DefaultChild().(awscdk.CfnElement))
		return props(resources[id].(map[string]any))["Environment"].(map[string]any)["Variables"].(map[string]any)
	}
	enqueue, granted := envOf(j.Enqueue), envOf(orders)
	passed := 0
	for _, v := range deploy.ServiceVars {
		name := v.Name
		want, ok := enqueue[name]
		if !ok {
			if got, ok := granted[name]; ok {
				t.Errorf("%s: the granted function is told %s, the enqueue function nothing", name, jsonString(got))
			}
			continue
		}
		passed++
		if got := granted[name]; jsonString(got) != jsonString(want) {
			t.Errorf("%s: the granted function is told %s, the enqueue function %s", name, jsonString(got), jsonString(want))
		}
	}
	for name, want := range map[string]string{"JOBS_EVENTS": `"all"`, "JOBS_RETENTION": `"720h0m0s"`} {
		if got := jsonString(enqueue[name]); got != want {
			t.Errorf("the enqueue function is told %s=%s, want %s: the stack does not exercise it", name, got, want)
		}
	}
	// The table, the queue, the lanes' queues and graces, the dispatch
	// grace, the retention, message first, the key ring and
	// JOBS_EVENTS.
	if passed != 9 {
		t.Errorf("%d of ServiceVars passed on, want 9 (the enqueue function is told %v)", passed, enqueue)
	}
}

func TestGrantReadJobs(t *testing.T) {
	s := environments(t)["sources"]
	var readerRole string
	for id, r := range s.resources("AWS::IAM::Role") {
		if props(r)["Description"] == "job reader" {
			readerRole = id
		}
	}
	var actions []string
	for _, pol := range s.resources("AWS::IAM::Policy") {
		if !strings.Contains(jsonString(props(pol)["Roles"]), readerRole) {
			continue
		}
		for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			actions = append(actions, jsonString(st.(map[string]any)["Action"]))
		}
	}
	if readerRole == "" || strings.Join(actions, " ") != `"dynamodb:GetItem"` {
		t.Errorf("reader role %q may %v, want exactly dynamodb:GetItem", readerRole, actions)
	}
}

// Only known principals may send to the queue: the construct's own senders,
// functions given GrantEnqueue, configured envelope senders, and AWS
// services for configured sources (aws:SourceArn present).
func TestQueueDeniesUnknownSenders(t *testing.T) {
	for name, s := range environments(t) {
		var deny map[string]any
		for _, p := range s.resources("AWS::SQS::QueuePolicy") {
			for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				if stmt := st.(map[string]any); stmt["Sid"] == "OnlyKnownSenders" {
					deny = stmt
				}
			}
		}
		if deny == nil || deny["Effect"] != "Deny" || jsonString(deny["Principal"]) != `{"AWS":"*"}` || deny["Action"] != "sqs:SendMessage" {
			t.Fatalf("%s: no deny of unknown senders: %s", name, jsonString(deny))
		}
		cond := jsonString(deny["Condition"])
		if !strings.Contains(cond, `"Null":{"aws:SourceArn":"true"}`) {
			t.Errorf("%s: the deny does not spare AWS services for configured sources: %s", name, cond)
		}
		// The known senders are the roles granted sqs:SendMessage on the
		// queue (one grant does both), the configured envelope senders.
		want := []string{"enqueueRole", "workerRole", "sweeperRole", "cancelRole"}
		if name == "sources" {
			want = append(want, "OrdersServiceRole", "arn:aws:iam::123456789012:role/nightly-batch")
		}
		for _, w := range want {
			if !strings.Contains(cond, w) {
				t.Errorf("%s: %s may not send: %s", name, w, cond)
			}
		}
		for _, never := range []string{"getjobRole", "schedulesRole"} {
			if strings.Contains(cond, never) {
				t.Errorf("%s: %s may send: %s", name, never, cond)
			}
		}
	}
}

// Every Grant method returns the awsiam.Grant of what it added to the
// grantee's policy, so a team can chain it (ApplyBefore, Combine) like
// any CDK grant: with a customer-managed key, its uses are in it too.
func TestGrantsReturnWhatTheyGrant(t *testing.T) {
	cfg := DevConfig("grantees")
	cfg.CustomerManagedKey = true
	got := map[string]string{}
	synth(t, cfg, func(stack awscdk.Stack, j *Jobs) {
		fn := awslambda.NewFunction(stack, jsii.String("Orders"), &awslambda.FunctionProps{
			Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"),
			Code: awslambda.Code_FromAsset(jsii.String(j.asset("enqueue")), nil),
		})
		role := func(id string) awsiam.Role {
			return awsiam.NewRole(stack, jsii.String(id), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
		}
		for name, g := range map[string]awsiam.Grant{
			"GrantEnqueue": j.GrantEnqueue(fn), "GrantReadJobs": j.GrantReadJobs(role("Reader")),
			"GrantInvoke": j.GrantInvoke(role("Caller")), "GrantOperate": j.GrantOperate(role("Operator")),
		} {
			if g == nil || !*g.Success() {
				t.Errorf("%s: grant %v did not succeed", name, g)
				continue
			}
			var actions []string
			for _, st := range *g.PrincipalStatements() {
				for _, a := range *st.Actions() {
					actions = append(actions, *a)
				}
			}
			got[name] = dedupe(actions)
		}
	})
	want := map[string]string{
		"GrantEnqueue":  "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:PutItem dynamodb:Query dynamodb:UpdateItem kms:Decrypt kms:Encrypt kms:GenerateDataKey secretsmanager:GetSecretValue sqs:SendMessage",
		"GrantReadJobs": "dynamodb:GetItem kms:Decrypt",
		"GrantInvoke":   "execute-api:Invoke",
		"GrantOperate":  "execute-api:Invoke",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s grants %q, want %q", name, got[name], w)
		}
	}
}
