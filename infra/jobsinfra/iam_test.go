package jobsinfra

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

const (
	testAccount = "123456789012"
	testRegion  = "us-east-1"
)

// iamDeployment is a synthesized stack of the construct whose policies the
// recorded calls are evaluated against: the construct as a team deploys
// it, with the demo kinds' schedules, an S3 and an EventBridge source, a
// function of the team's given GrantEnqueue, a caller's role given
// GrantInvoke, an operator's given GrantOperate, and a stranger: a role of
// the same account whose own policy allows every action the negative
// controls try (so only the resources' policies can deny it).
type iamDeployment struct {
	name  string
	t     *cfnTemplate
	roles map[string]string // principal (iamcalls) -> role logical id
	res   map[string]string // deployment resource -> logical id
	group string            // the runtime schedule group's name
	rule  string            // the EventBridge source rule's logical id
}

// stranger is the principal of the negative controls.
const stranger = "stranger"

func synthIAM(t *testing.T, name string, cmk bool) *iamDeployment {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(t), Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("iam-"+name), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)},
	})
	cfg := DevConfig(name)
	cfg.CustomerManagedKey = cmk
	cfg.S3Sources = []S3Source{{BucketName: "uploads-example"}}
	cfg.EventBridgeSource = []EventBridgeSource{{Sources: []string{"shop.orders"}}}
	reg := jobs.NewRegistry()
	if _, err := examplekinds.Register(reg); err != nil {
		t.Fatal(err)
	}
	// The example kinds' lanes, as the local stack runs them.
	// example.blob's large parts, as the local stack runs it: the bucket.
	if err := examplekinds.RegisterBlob(reg); err != nil {
		t.Fatal(err)
	}
	j := NewJobs(stack, "Jobs", &JobsProps{Config: cfg, Bootstraps: fakeBootstraps(t), Schedules: reg.Schedules(), Lanes: reg.Lanes(), LargeParts: reg.LargeParts()})
	enqueuer := awslambda.NewFunction(stack, jsii.String("Enqueuer"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"),
		Code: awslambda.Code_FromAsset(jsii.String(filepath.Join(fakeBootstraps(t), "enqueue")), nil),
	})
	j.GrantEnqueue(enqueuer)
	role := func(id string) awsiam.Role {
		return awsiam.NewRole(stack, jsii.String(id), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
	}
	caller, operator, other := role("Caller"), role("Operator"), role("Stranger")
	j.GrantInvoke(caller)
	j.GrantOperate(operator)
	other.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("sqs:SendMessage", "secretsmanager:GetSecretValue", "execute-api:Invoke", "events:PutEvents",
			"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "s3:GetObject", "s3:PutObject", "s3:GetObjectVersion", "s3:DeleteObjectVersion"),
		Resources: jsii.Strings("*"),
	}))
	raw := assertions.Template_FromStack(stack, nil).ToJSON()
	tmpl, err := newTemplate(*raw, testAccount, testRegion)
	if err != nil {
		t.Fatal(err)
	}
	id := func(c constructs.IConstruct) string {
		return *stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
	}
	d := &iamDeployment{name: name, t: tmpl, roles: map[string]string{
		iamcalls.Scheduler: id(j.SchedulerRole), iamcalls.Enqueuer: id(enqueuer.Role()),
		iamcalls.Caller: id(caller), iamcalls.Operator: id(operator), stranger: id(other),
	}, res: map[string]string{
		"table": id(j.Table), "queue": id(j.Queue), "dlq": id(j.DLQ), "scheduledlq": id(j.ScheduleDLQ),
		"secret/payload": id(j.payloadSecret), "secret/page": id(j.pageSecret), "api": id(j.API),
		"role/scheduler": id(j.SchedulerRole), "bus": id(j.EventBus), "bucket": id(j.Parts),
	}, group: j.Names.RuntimeScheduleGroup}
	for _, f := range FunctionNames {
		d.roles[f] = id(j.Functions[f].Role())
	}
	// Each other lane: its queues ("queue/LANE", "dlq/LANE") and its
	// worker's role (iamcalls.LaneWorker).
	for lane, l := range j.Lanes {
		if lane == "" {
			continue
		}
		d.res["queue/"+lane], d.res["dlq/"+lane] = id(l.Queue), id(l.DLQ)
		d.roles[iamcalls.LaneWorker(lane)] = id(l.Worker.Role())
	}
	if j.Key != nil {
		d.res["key"] = id(j.Key)
	}
	for rid, r := range tmpl.resources {
		if r.Type == "AWS::Events::Rule" && strings.Contains(jsonString(r.Properties["EventPattern"]), "shop.orders") {
			d.rule = rid
		}
	}
	return d
}

// authz is one authorisation AWS would make.
type authz struct {
	principal string // an iamcalls principal, or an AWS service ("s3.amazonaws.com")
	action    string
	resource  string // as iamcalls records it ("table", "queue", "route/GET /v1/jobs", ...)
	context   map[string]string
	// why names where it comes from: recorded, a cold start, the key, a
	// source, a negative control.
	why string
}

func (a authz) String() string {
	ctx := ""
	if len(a.context) > 0 {
		ctx = " " + jsonString(a.context)
	}
	return fmt.Sprintf("%s %s %s%s (%s)", a.principal, a.action, a.resource, ctx, a.why)
}

var routeParam = regexp.MustCompile(`\{[^}]+\}`)

// arnOf returns the ARN AWS authorises a deployment resource as, and the
// logical id of the resource whose policy applies ("" for none).
func (d *iamDeployment) arnOf(resource string) (string, string, error) {
	t := d.t
	switch {
	case strings.HasPrefix(resource, "arn:"):
		return resource, "", nil
	case resource == "table" || strings.HasPrefix(resource, "table/index/"):
		arn, err := t.getAtt(d.res["table"], "Arn")
		return arn + strings.TrimPrefix(resource, "table"), d.res["table"], err
	case resource == "queue" || resource == "dlq" || resource == "scheduledlq" || resource == "key" || isLaneQueue(resource):
		if d.res[resource] == "" {
			return "", "", fmt.Errorf("resource %q: no such lane in the deployment", resource)
		}
		arn, err := t.getAtt(d.res[resource], "Arn")
		return arn, d.res[resource], err
	case strings.HasPrefix(resource, "secret/"):
		arn, err := t.ref(d.res[resource])
		return arn, d.res[resource], err
	case resource == "bus":
		arn, err := t.getAtt(d.res[resource], "Arn")
		return arn, d.res[resource], err
	case resource == "role/scheduler":
		arn, err := t.getAtt(d.res[resource], "Arn")
		return arn, "", err
	case resource == "bucket":
		arn, err := t.getAtt(d.res["bucket"], "Arn")
		return arn, d.res["bucket"], err
	case resource == "bucket/parts":
		arn, err := t.getAtt(d.res["bucket"], "Arn")
		return arn + "/parts/ab12/a-job/payload-x", d.res["bucket"], err
	case resource == "bucket/uploads":
		arn, err := t.getAtt(d.res["bucket"], "Arn")
		return arn + "/uploads/0123abcd/an-upload/payload", d.res["bucket"], err
	case resource == "schedule/runtime/*":
		return t.arn("scheduler", "schedule/"+d.group+"/a-schedule"), "", nil
	case strings.HasPrefix(resource, "route/"):
		method, path, _ := strings.Cut(strings.TrimPrefix(resource, "route/"), " ")
		return t.arn("execute-api", d.res["api"]+"/$default/"+method+routeParam.ReplaceAllString(path, "p1")), "", nil
	}
	return "", "", fmt.Errorf("resource %q is not modelled", resource)
}

// isLaneQueue reports whether resource is another lane's queue or DLQ,
// as iamcalls records them ("queue/LANE", "dlq/LANE").
func isLaneQueue(resource string) bool {
	return strings.HasPrefix(resource, "queue/") || strings.HasPrefix(resource, "dlq/")
}

// encrypted reports whether a resource's data is encrypted with the
// customer-managed key, and the service that calls KMS for it.
func (d *iamDeployment) encrypted(resource string) (string, bool) {
	if d.res["key"] == "" {
		return "", false
	}
	switch {
	case resource == "table" || strings.HasPrefix(resource, "table/index/"):
		return "dynamodb", true
	case resource == "queue" || resource == "dlq" || resource == "scheduledlq" || isLaneQueue(resource):
		return "sqs", true
	case strings.HasPrefix(resource, "secret/"):
		return "secretsmanager", true
	case resource == "bucket/parts" || resource == "bucket/uploads":
		return "s3", true
	}
	return "", false
}

// implied returns the KMS calls a service makes with the caller's identity
// when a call's data is encrypted with the customer-managed key: reading
// or writing a table item decrypts the table key; sending a message
// generates a data key (and may decrypt a cached one); receiving one, or
// reading a secret, decrypts.
func (d *iamDeployment) implied(a authz) []authz {
	service, ok := d.encrypted(a.resource)
	if !ok {
		return nil
	}
	var actions []string
	switch {
	case service == "dynamodb":
		actions = []string{"kms:Decrypt"}
	case a.action == "sqs:SendMessage":
		actions = []string{"kms:GenerateDataKey", "kms:Decrypt"}
	case a.action == "sqs:ReceiveMessage", a.action == "secretsmanager:GetSecretValue":
		actions = []string{"kms:Decrypt"}
	case a.action == "s3:GetObject":
		actions = []string{"kms:Decrypt"}
	case a.action == "s3:PutObject": // a multipart write decrypts its parts' data key too
		actions = []string{"kms:GenerateDataKey", "kms:Decrypt"}
	}
	var out []authz
	for _, act := range actions {
		ctx := map[string]string{"kms:ViaService": service + "." + testRegion + ".amazonaws.com", "kms:CallerAccount": testAccount}
		for k, v := range a.context {
			if strings.HasPrefix(k, "aws:Source") {
				ctx[k] = v
			}
		}
		out = append(out, authz{principal: a.principal, action: act, resource: "key", context: ctx, why: "the key, for " + a.action + " " + a.resource})
	}
	return out
}

// coldStarts are the calls lambdafn makes at a function's cold start, from
// the environment the construct gives it: reading each secret it names.
func (d *iamDeployment) coldStarts() []authz {
	var out []authz
	for principal, vars := range d.functionEnvs() {
		for name, secret := range map[string]string{"JOBS_PAYLOAD_KEYRING_SECRET": "secret/payload", "JOBS_PAGE_TOKEN_SECRET": "secret/page"} {
			if ref, ok := vars[name].(map[string]any); ok && ref["Ref"] == d.res[secret] {
				out = append(out, authz{principal: principal, action: "secretsmanager:GetSecretValue", resource: secret, why: "cold start: " + name})
			}
		}
	}
	return out
}

// functionEnvs returns each function's environment variables, by the
// principal of its role.
func (d *iamDeployment) functionEnvs() map[string]map[string]any {
	byRole := map[string]string{}
	for p, r := range d.roles {
		byRole[r] = p
	}
	out := map[string]map[string]any{}
	for _, r := range d.t.resources {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		roleAtt, _ := r.Properties["Role"].(map[string]any)
		role, _ := roleAtt["Fn::GetAtt"].([]any)
		env, _ := r.Properties["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		if len(role) == 0 || vars == nil {
			continue
		}
		if p, ok := byRole[fmt.Sprint(role[0])]; ok {
			out[p] = vars
		}
	}
	return out
}

// simulation is the request for @cloud-copilot/iam-simulate.
func (d *iamDeployment) simulation(a authz) (map[string]any, error) {
	arn, holder, err := d.arnOf(a.resource)
	if err != nil {
		return nil, err
	}
	ctx := map[string]any{"aws:SecureTransport": "true"}
	for k, v := range a.context {
		ctx[k] = v
	}
	sim := map[string]any{"serviceControlPolicies": []any{}, "resourceControlPolicies": []any{}}
	var principal string
	identity := []any{}
	if service := strings.HasSuffix(a.principal, ".amazonaws.com"); service {
		principal = a.principal
		ctx["aws:PrincipalServiceName"] = a.principal
		ctx["aws:PrincipalIsAWSService"] = "true"
	} else {
		ctx["aws:PrincipalIsAWSService"] = "false"
		role, ok := d.roles[a.principal]
		if !ok {
			return nil, fmt.Errorf("principal %q has no role in the deployment", a.principal)
		}
		roleARN, err := d.t.getAtt(role, "Arn")
		if err != nil {
			return nil, err
		}
		principal = "arn:aws:sts::" + testAccount + ":assumed-role/" + role + "/session"
		ctx["aws:PrincipalArn"] = roleARN
		ctx["aws:PrincipalAccount"] = testAccount
		docs, err := d.t.identityPolicies(role)
		if err != nil {
			return nil, err
		}
		for i, doc := range docs {
			identity = append(identity, map[string]any{"name": fmt.Sprintf("policy%d", i), "policy": doc})
		}
	}
	sim["identityPolicies"] = identity
	sim["request"] = map[string]any{"principal": principal, "action": a.action,
		"resource": map[string]any{"resource": arn, "accountId": testAccount}, "contextVariables": ctx}
	if holder != "" {
		rp, err := d.t.resourcePolicy(holder)
		if err != nil {
			return nil, err
		}
		if rp != nil {
			sim["resourcePolicy"] = rp
		}
	}
	return sim, nil
}

// evaluate runs every authorisation through the simulator (one node
// process) and returns each one's result: Allowed, ExplicitlyDenied,
// ImplicitlyDenied, or Error with the simulator's reasons.
func (d *iamDeployment) evaluate(t *testing.T, list []authz) []string {
	t.Helper()
	sims := make([]map[string]any, len(list))
	for i, a := range list {
		sim, err := d.simulation(a)
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		sims[i] = sim
	}
	in, err := json.Marshal(sims)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := filepath.Abs(filepath.Join("..", "_tools"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tools, "node_modules", "@cloud-copilot", "iam-simulate")); err != nil {
		t.Fatalf("the IAM simulator is not installed (make infra/_tools/node_modules/.installed installs it from infra/_tools/package-lock.json): %v", err)
	}
	cmd := exec.Command("node", filepath.Join(tools, "iamsim.mjs"))
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the IAM simulator: %v: %s", err, stderr.String())
	}
	var results []struct {
		Result string
		Errors any
	}
	if err := json.Unmarshal(out.Bytes(), &results); err != nil || len(results) != len(list) {
		t.Fatalf("the IAM simulator answered %d results for %d requests (%v): %s", len(results), len(list), err, out.String())
	}
	got := make([]string, len(results))
	for i, r := range results {
		got[i] = r.Result
		if r.Result == "Error" {
			got[i] = "Error " + jsonString(r.Errors)
		}
	}
	return got
}

// recordedCalls loads the calls the local stack's functions, event
// source, Scheduler and the API's callers made in make test's end-to-end
// and reliability runs.
func recordedCalls(t *testing.T) []iamcalls.Call {
	t.Helper()
	dir := os.Getenv(iamcalls.RecordDirEnv)
	if dir == "" {
		dir = filepath.Join("..", "..", "build", "iam-calls")
	}
	calls, err := iamcalls.Load(dir)
	if err != nil || len(calls) == 0 {
		t.Fatalf("no AWS calls recorded in %s (%v): make test records them (its end-to-end and reliability runs); run it first", dir, err)
	}
	return calls
}

// Every AWS call the system makes is allowed by the policies it deploys:
// each call recorded in make test's end-to-end and reliability runs,
// attributed to the role of the principal that made it, each call
// lambdafn makes at a cold start, and, with a customer-managed key, the
// KMS calls each implies, evaluated with a maintained IAM policy simulator
// against the role's policies and the target's resource policy (queue,
// secrets, key) as synthesized. Negative controls that AWS must deny are
// denied, so the evaluation cannot pass hollowly.
func TestEveryCallIsAllowedByTheDeployedPolicies(t *testing.T) {
	calls := recordedCalls(t)
	// The recording covers every principal and the paths that matter.
	seen := map[string]bool{}
	for _, c := range calls {
		if c.Action == iamcalls.Unmapped {
			t.Errorf("%s made a call the recorder cannot map to IAM: %s", c.Principal, c.Resource)
		}
		seen[c.Principal] = true
		seen[c.Principal+" "+c.Action+" "+c.Resource] = true
	}
	for _, p := range append(append([]string{}, FunctionNames...), iamcalls.Scheduler, iamcalls.Enqueuer, iamcalls.Caller, iamcalls.Operator) {
		if !seen[p] {
			t.Errorf("no call of %s was recorded: the end-to-end runs must exercise it", p)
		}
	}
	for _, must := range []string{
		"cancel sqs:SendMessage queue",             // a retry goes straight to the queue
		"cancel dynamodb:PutItem table",            // cancelling a batch's last job creates its completion job
		"cancel sqs:ReceiveMessage dlq",            // the operators' redrive
		"cancel sqs:DeleteMessage dlq/bulk",        // ...of a lane's DLQ
		"cancel sqs:SendMessage queue/bulk",        // ...to the lane's own queue
		"sweeper dynamodb:Query table/index/sweep", // a sweep
		"worker sqs:ReceiveMessage queue",          // the event source, as the worker's role
		"enqueue sqs:SendMessage queue/bulk",       // a job sent to its kind's lane
		"workerbulk sqs:ReceiveMessage queue/bulk", // a lane's event source, as its worker's role
		"workerurgent dynamodb:UpdateItem table",   // a lane's worker claims
		"scheduler sqs:SendMessage queue",          // a schedule's fire
		"schedules scheduler:CreateSchedule schedule/runtime/*",
		"schedules scheduler:GetSchedule schedule/runtime/*",    // a create's outcome, learned
		"schedules scheduler:UpdateSchedule schedule/runtime/*", // a schedule left behind, updated
		"operator execute-api:Invoke route/POST /v1/admin/dead-letters/{action}",
		"enqueue s3:PutObject bucket/parts",         // a large payload, written before its job
		"enqueue s3:PutObjectTagging bucket/parts",  // ...tagged with how long it lasts
		"workerlong s3:GetObject bucket/parts",      // ...read at its claim (example.blob runs in the long lane)
		"workerlong s3:PutObject bucket/parts",      // a large result
		"getjob s3:GetObject bucket/parts",          // its link, fetched by the caller
		"enqueue s3:PutObject bucket/uploads",       // an upload begun, and its parts PUT through its links
		"workerlong s3:PutObject bucket/uploads",    // ...completed by a worker of its kind's lane (example.blob's)
		"workerlong s3:GetObject bucket/uploads",    // ...read
		"workerlong s3:DeleteObject bucket/uploads", // ...and deleted
	} {
		if !seen[must] {
			t.Errorf("the recording lacks %q", must)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for _, cmk := range []bool{false, true} {
		name := "iam"
		if cmk {
			name = "iam-cmk"
		}
		t.Run(name, func(t *testing.T) {
			d := synthIAM(t, name, cmk)
			var allowed []authz
			for _, c := range calls {
				allowed = append(allowed, authz{principal: c.Principal, action: c.Action, resource: c.Resource, context: c.Context, why: "recorded"})
			}
			allowed = append(allowed, d.coldStarts()...)
			allowed = append(allowed, d.eventSenders()...)
			sourceARN, _ := d.t.getAtt(d.rule, "Arn")
			allowed = append(allowed,
				authz{principal: "s3.amazonaws.com", action: "sqs:SendMessage", resource: "queue", why: "the S3 source",
					context: map[string]string{"aws:SourceArn": "arn:aws:s3:::uploads-example", "aws:SourceAccount": testAccount}},
				authz{principal: "events.amazonaws.com", action: "sqs:SendMessage", resource: "queue", why: "the EventBridge source",
					context: map[string]string{"aws:SourceArn": sourceARN, "aws:SourceAccount": testAccount}},
			)
			// Scheduler delivers a fire it could not to the schedules' DLQ
			// with its role (not exercised locally: no fire fails there).
			allowed = append(allowed, authz{principal: iamcalls.Scheduler, action: "sqs:SendMessage", resource: "scheduledlq", why: "a schedule's dead letter"})
			for _, a := range allowed {
				allowed = append(allowed, d.implied(a)...)
			}
			denied := d.negativeControls()
			results := d.evaluate(t, append(append([]authz{}, allowed...), denied...))
			triples := map[string]bool{}
			for i, a := range allowed {
				triples[a.principal+" "+a.action+" "+a.resource] = true
				if results[i] != "Allowed" {
					t.Errorf("AWS would refuse: %s: %s", a, results[i])
				}
			}
			for i, a := range denied {
				if r := results[len(allowed)+i]; r != "ExplicitlyDenied" && r != "ImplicitlyDenied" {
					t.Errorf("AWS would allow: %s: %s", a, r)
				}
			}
			keys := make([]string, 0, len(triples))
			for k := range triples {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			t.Logf("%s: %d distinct (role, action, resource) triples allowed, %d negative controls denied", name, len(triples), len(denied))
			// docs/operations/SECURITY.md states the controls as this list has them
			// (the triples as make test's recording last measured them).
			if doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations", "SECURITY.md")); err != nil {
				t.Error(err)
			} else if m := statedControls.FindSubmatch(doc); m == nil || string(m[map[bool]int{false: 1, true: 2}[cmk]]) != strconv.Itoa(len(denied)) {
				t.Errorf("docs/operations/SECURITY.md states %q negative controls, the test has %d (with a customer-managed key: %v)", m, len(denied), cmk)
			}
			if testing.Verbose() {
				t.Log("\n  " + strings.Join(keys, "\n  "))
			}
		})
	}
}

// Every resource policy that guards the deployment is needed by some
// negative control: with any one of them removed from the template (each
// queue's and DLQ's, the schedules' DLQ's, the bus's, each secret's, the
// key's statement of its own), some control AWS must deny is allowed, so
// the evaluation would catch a policy gone missing.
func TestEveryResourcePolicyIsNeeded(t *testing.T) {
	d := synthIAM(t, "iam-removed", true)
	controls := d.negativeControls()
	if got := d.evaluate(t, controls); slices.ContainsFunc(got, func(r string) bool { return r != "ExplicitlyDenied" && r != "ImplicitlyDenied" }) {
		t.Fatalf("a negative control is allowed with every policy in place: %v", got)
	}
	removals := map[string]func(map[string]cfnResource){}
	for id, r := range d.t.resources {
		switch r.Type {
		case "AWS::SQS::QueuePolicy", "AWS::SecretsManager::ResourcePolicy", "AWS::Events::EventBusPolicy", "AWS::S3::BucketPolicy":
			removals[r.Type+" "+id] = func(res map[string]cfnResource) { delete(res, id) }
		}
	}
	key := d.res["key"]
	removals["the key policy's OnlyThroughItsServices"] = func(res map[string]cfnResource) {
		k := res[key]
		props := maps.Clone(k.Properties)
		policy := maps.Clone(props["KeyPolicy"].(map[string]any))
		policy["Statement"] = slices.DeleteFunc(slices.Clone(asList(policy["Statement"])), func(st any) bool {
			return st.(map[string]any)["Sid"] == "OnlyThroughItsServices"
		})
		props["KeyPolicy"] = policy
		res[key] = cfnResource{Type: k.Type, Properties: props}
	}
	// The queue pair and the schedules' DLQ of every lane (4 with the
	// example kinds' lanes), the two secrets, the bus, the bucket and the
	// key.
	if n := len(removals); n < 2*4+1+2+1+1+1 {
		t.Fatalf("%d resource policies to remove: %v", n, slices.Sorted(maps.Keys(removals)))
	}
	for _, name := range slices.Sorted(maps.Keys(removals)) {
		without := *d
		tmpl := *d.t
		tmpl.resources = maps.Clone(d.t.resources)
		removals[name](tmpl.resources)
		without.t = &tmpl
		var caught []string
		for i, r := range without.evaluate(t, controls) {
			if r != "ExplicitlyDenied" && r != "ImplicitlyDenied" {
				caught = append(caught, controls[i].String())
			}
		}
		if len(caught) == 0 {
			t.Errorf("without %s every negative control is still denied: the evaluation would not notice it missing", name)
		} else {
			t.Logf("without %s: allowed %v", name, caught)
		}
	}
}

// statedControls is docs/operations/SECURITY.md's count of the negative controls,
// without and with a customer-managed key.
var statedControls = regexp.MustCompile(`(\d+) negative controls denied \((\d+) with a customer-managed key\)`)

// negativeControls are the authorisations AWS must deny. The stranger's
// own policy allows each action it tries, so only the resources' policies
// (each lane's queue and DLQ, the schedules' DLQ, the bus, each secret,
// the key) can deny it.
func (d *iamDeployment) negativeControls() []authz {
	denied := []authz{
		{principal: "getjob", action: "sqs:SendMessage", resource: "queue"},
		{principal: "getjob", action: "dynamodb:UpdateItem", resource: "table"},
		{principal: "getjob", action: "events:PutEvents", resource: "bus"},
		{principal: "enqueue", action: "events:PutEvents", resource: "bus"},
		{principal: stranger, action: "events:PutEvents", resource: "bus"},
		{principal: "worker", action: "secretsmanager:GetSecretValue", resource: "secret/page"},
		{principal: stranger, action: "secretsmanager:GetSecretValue", resource: "secret/payload"},
		{principal: stranger, action: "secretsmanager:GetSecretValue", resource: "secret/page"},
		// No one sends to a DLQ but Scheduler's role to the schedules'
		// (SQS moves dead letters itself): not the functions that send to
		// the queues, not the stranger.
		{principal: "worker", action: "sqs:SendMessage", resource: "dlq"},
		{principal: stranger, action: "sqs:SendMessage", resource: "scheduledlq"},
		{principal: "worker", action: "sqs:SendMessage", resource: "scheduledlq"},
		{principal: iamcalls.Caller, action: "execute-api:Invoke", resource: "route/GET /v1/admin/jobs"},
		{principal: iamcalls.Caller, action: "execute-api:Invoke", resource: "route/POST /v1/admin/jobs/{id}/{action}"},
		{principal: iamcalls.Caller, action: "execute-api:Invoke", resource: "route/POST /v1/admin/dead-letters/{action}"},
		{principal: "s3.amazonaws.com", action: "sqs:SendMessage", resource: "queue",
			context: map[string]string{"aws:SourceArn": "arn:aws:s3:::someone-elses", "aws:SourceAccount": testAccount}},
		{principal: "s3.amazonaws.com", action: "sqs:SendMessage", resource: "queue",
			context: map[string]string{"aws:SourceArn": "arn:aws:s3:::uploads-example", "aws:SourceAccount": "210987654321"}},
		// The parts' data: not the stranger (its own policy allows it; the
		// bucket's denies it), not a role the descriptor gives no write.
		{principal: stranger, action: "s3:GetObject", resource: "bucket/parts"},
		{principal: stranger, action: "s3:PutObject", resource: "bucket/parts"},
		{principal: stranger, action: "s3:PutObject", resource: "bucket/uploads"},
		{principal: "getjob", action: "s3:PutObject", resource: "bucket/uploads"},
		// A GET or DELETE with a versionId (versionId=null in a bucket
		// without versioning) is authorised by its own action alone.
		{principal: stranger, action: "s3:GetObjectVersion", resource: "bucket/parts"},
		{principal: stranger, action: "s3:DeleteObjectVersion", resource: "bucket/parts"},
		{principal: "getjob", action: "s3:PutObject", resource: "bucket/parts"},
		{principal: "schedules", action: "s3:GetObject", resource: "bucket/parts"},
	}
	// The stranger sends to each lane's queue and DLQ, the default lane's
	// ("queue", "dlq") first.
	lanes := []string{""}
	for r := range d.res {
		if lane, ok := strings.CutPrefix(r, "queue/"); ok {
			lanes = append(lanes, lane)
		}
	}
	sort.Strings(lanes[1:])
	for _, lane := range lanes {
		q, dlq := "queue", "dlq"
		if lane != "" {
			q, dlq = "queue/"+lane, "dlq/"+lane
		}
		denied = append(denied,
			authz{principal: stranger, action: "sqs:SendMessage", resource: q},
			authz{principal: stranger, action: "sqs:SendMessage", resource: dlq})
	}
	if d.res["key"] != "" {
		// The key is used only through the services that hold the data:
		// neither the stranger nor a role granted the key decrypts a blob
		// by calling KMS itself.
		direct := map[string]string{"kms:CallerAccount": testAccount}
		denied = append(denied,
			authz{principal: stranger, action: "kms:Decrypt", resource: "key", context: direct},
			authz{principal: stranger, action: "kms:GenerateDataKey", resource: "key", context: direct},
			authz{principal: "worker", action: "kms:Decrypt", resource: "key", context: direct},
			authz{principal: "getjob", action: "kms:Decrypt", resource: "key", context: direct})
	}
	for i := range denied {
		denied[i].why = "negative control"
	}
	return denied
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
