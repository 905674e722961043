package jobsinfra

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// synthesized is one stack of the construct, as its template.
type synthesized struct {
	stack awscdk.Stack
	jobs  *Jobs
	raw   map[string]any
	t     *cfnTemplate
}

// synth synthesizes cfg in a stack pinned to the test account, calling
// more with the stack and the construct before synthesis.
func synth(t *testing.T, cfg Config, more func(awscdk.Stack, *Jobs)) *synthesized {
	t.Helper()
	return synthProps(t, &JobsProps{Config: cfg}, more)
}

// synthProps is synth with the construct's props (their Bootstraps are
// the fake ones).
func synthProps(t *testing.T, props *JobsProps, more func(awscdk.Stack, *Jobs)) *synthesized {
	t.Helper()
	cfg := props.Config
	props.Bootstraps = fakeBootstraps(t)
	app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(t), Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("test-"+cfg.Name), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)},
	})
	j := NewJobs(stack, "Jobs", props)
	if more != nil {
		more(stack, j)
	}
	raw := *assertions.Template_FromStack(stack, nil).ToJSON()
	tmpl, err := newTemplate(raw, testAccount, testRegion)
	if err != nil {
		t.Fatal(err)
	}
	return &synthesized{stack: stack, jobs: j, raw: raw, t: tmpl}
}

func (s *synthesized) id(c constructs.IConstruct) string {
	return *s.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// of returns the template's resources of a type.
func (s *synthesized) of(typ string) map[string]cfnResource {
	out := map[string]cfnResource{}
	for id, r := range s.t.resources {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

// Each secret's policy denies reading its value to every principal but
// the functions granted it and Config.KeyAdmins, whatever their own
// policies allow (the evaluation test tries a stranger allowed "*").
func TestSecretsDenyAllButTheirReaders(t *testing.T) {
	cfg := DevConfig("secrets")
	cfg.KeyAdmins = []string{"arn:aws:iam::123456789012:role/security"}
	s := synth(t, cfg, nil)
	want := map[string][]string{
		s.id(s.jobs.payloadSecret): {s.id(s.jobs.Enqueue.Role()), s.id(s.jobs.Worker.Role())},
		s.id(s.jobs.pageSecret):    {s.id(s.jobs.GetJob.Role()), s.id(s.jobs.Cancel.Role())},
	}
	policies := s.of("AWS::SecretsManager::ResourcePolicy")
	if len(policies) != 2 {
		t.Fatalf("%d secret policies, want 2", len(policies))
	}
	for _, p := range policies {
		secret := p.Properties["SecretId"].(map[string]any)["Ref"].(string)
		doc, err := s.t.resolve(p.Properties["ResourcePolicy"])
		if err != nil {
			t.Fatal(err)
		}
		st := doc.(map[string]any)["Statement"].([]any)
		if len(st) != 1 {
			t.Fatalf("%s: %d statements", secret, len(st))
		}
		stmt := st[0].(map[string]any)
		if stmt["Effect"] != "Deny" || jsonString(stmt["Principal"]) != `{"AWS":"*"}` || stmt["Action"] != "secretsmanager:GetSecretValue" {
			t.Errorf("%s: %s", secret, jsonString(stmt))
		}
		var readers []string
		for _, r := range stmt["Condition"].(map[string]any)["ArnNotLike"].(map[string]any)["aws:PrincipalArn"].([]any) {
			readers = append(readers, r.(string))
		}
		var wantARNs []string
		for _, role := range want[secret] {
			wantARNs = append(wantARNs, "arn:aws:iam::"+testAccount+":role/"+role)
		}
		wantARNs = append(wantARNs, cfg.KeyAdmins...)
		sort.Strings(readers)
		sort.Strings(wantARNs)
		if !slices.Equal(readers, wantARNs) {
			t.Errorf("%s may be read by %v, want %v", secret, readers, wantARNs)
		}
	}
}

// Config.CustomerManagedKey: off, AWS's keys and no KMS key of ours; on,
// one rotated key encrypts the table, both queues, the schedules' DLQ and
// both secrets, and the sources' AWS services may use it for this account
// only.
func TestCustomerManagedKey(t *testing.T) {
	cfg := DevConfig("nokey")
	off := synth(t, cfg, nil)
	if keys := off.of("AWS::KMS::Key"); len(keys) != 0 || off.jobs.Key != nil {
		t.Errorf("a key without the option: %v", keys)
	}
	for _, tbl := range off.of("AWS::DynamoDB::Table") {
		if sse := jsonString(tbl.Properties["SSESpecification"]); sse != `{"SSEEnabled":true}` {
			t.Errorf("the table's encryption without the option: %s", sse)
		}
	}
	cfg.Name, cfg.CustomerManagedKey = "key", true
	cfg.S3Sources = []S3Source{{BucketName: "uploads-example"}}
	cfg.EventBridgeSource = []EventBridgeSource{{Sources: []string{"shop.orders"}}}
	on := synth(t, cfg, nil)
	keys := on.of("AWS::KMS::Key")
	if len(keys) != 1 {
		t.Fatalf("%d keys, want 1", len(keys))
	}
	key := on.id(on.jobs.Key)
	if keys[key].Properties["EnableKeyRotation"] != true {
		t.Errorf("the key does not rotate: %s", jsonString(keys[key].Properties))
	}
	ref := `{"Fn::GetAtt":["` + key + `","Arn"]}`
	for id, tbl := range on.of("AWS::DynamoDB::Table") {
		sse := tbl.Properties["SSESpecification"].(map[string]any)
		if sse["SSEType"] != "KMS" || jsonString(sse["KMSMasterKeyId"]) != ref {
			t.Errorf("table %s: %s", id, jsonString(sse))
		}
	}
	queues := on.of("AWS::SQS::Queue")
	if len(queues) != 3 {
		t.Errorf("%d queues, want 3", len(queues))
	}
	for id, q := range queues {
		if jsonString(q.Properties["KmsMasterKeyId"]) != ref {
			t.Errorf("queue %s: %s", id, jsonString(q.Properties))
		}
	}
	for id, sec := range on.of("AWS::SecretsManager::Secret") {
		if jsonString(sec.Properties["KmsKeyId"]) != ref {
			t.Errorf("secret %s: %s", id, jsonString(sec.Properties))
		}
	}
	// CDK's S3 notification and EventBridge target let those services use
	// the key of the queue they send to (TestEveryCallIsAllowedByTheDeployedPolicies
	// evaluates their sends and the KMS calls they imply).
	policy := jsonString(keys[key].Properties["KeyPolicy"])
	for _, want := range []string{`"Principal":{"Service":"s3.amazonaws.com"}`, `"Principal":{"Service":"events.amazonaws.com"}`} {
		if !strings.Contains(policy, want) {
			t.Errorf("the key policy lacks %s: %s", want, policy)
		}
	}
}

// Every variable the construct sets on a function is one a team may not
// set through Config.Environment (reservedEnv): a stack with every option
// that sets one.
func TestReservedEnvironmentCoversWhatTheConstructSets(t *testing.T) {
	cfg := DevConfig("everything")
	cfg.Tracing = true
	cfg.Operators = []string{"arn:aws:iam::123456789012:role/oncall"}
	cfg.S3Sources = []S3Source{{BucketName: "uploads-example"}}
	cfg.Environment = map[string]string{"TEAM_SETTING": "1"}
	s := synthProps(t, &JobsProps{Config: cfg, LargeParts: true}, nil)
	fns := 0
	for id, f := range s.of("AWS::Lambda::Function") {
		env, _ := f.Properties["Environment"].(map[string]any)
		vars, _ := env["Variables"].(map[string]any)
		fn, _ := vars["JOBS_FUNCTION"].(string)
		if fn == "" {
			continue // not one of the seven (a CDK helper function)
		}
		fns++
		for name := range vars {
			if _, mine := cfg.Environment[name]; mine {
				continue
			}
			if !slices.Contains(reservedEnv, name) {
				t.Errorf("function %s (%s): the construct sets %s, which the descriptor does not list as the construct's (a team could set it too)", fn, id, name)
			}
		}
		// Every variable the descriptor says the construct sets for this
		// function is set.
		for _, v := range deploy.Env {
			if v.Construct && v.ReadBy(fn) {
				if _, ok := vars[v.Name]; !ok {
					t.Errorf("function %s: the descriptor says the construct sets %s for it, and it does not", fn, v.Name)
				}
			}
		}
	}
	if fns != len(FunctionNames) {
		t.Fatalf("%d of the deployment's %d functions found", fns, len(FunctionNames))
	}
}

// GrantInvoke grants every route but the operators'; GrantOperate every
// route, and makes the role an operator of the API.
func TestGrantInvokeAndGrantOperate(t *testing.T) {
	cfg := DevConfig("grants")
	var caller, operator awsiam.Role
	s := synth(t, cfg, func(stack awscdk.Stack, j *Jobs) {
		caller = awsiam.NewRole(stack, jsii.String("Caller"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
		operator = awsiam.NewRole(stack, jsii.String("Operator"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
		j.GrantInvoke(caller)
		j.GrantOperate(operator)
	})
	routesOf := func(role string) string {
		docs, err := s.t.identityPolicies(role)
		if err != nil {
			t.Fatal(err)
		}
		return jsonString(docs)
	}
	api := s.id(s.jobs.API)
	c, o := routesOf(s.id(caller)), routesOf(s.id(operator))
	for _, r := range routes {
		arn := `arn:aws:execute-api:` + testRegion + `:` + testAccount + `:` + api + `/*/` + r.Method + r.ARNPath() + `"`
		if got := strings.Contains(c, arn); got != (r.Auth == deploy.AuthCaller) {
			t.Errorf("GrantInvoke grants %s: %v", r.Key(), got)
		}
		if !strings.Contains(o, arn) {
			t.Errorf("GrantOperate does not grant %s: %s", r.Key(), o)
		}
	}
	operators := ""
	for _, f := range s.of("AWS::Lambda::Function") {
		if strings.Contains(jsonString(f.Properties["Description"]), "cancel") {
			env := f.Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
			var err error
			if operators, err = s.t.resolveString(env["JOBS_OPERATORS"]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if operators != "arn:aws:iam::"+testAccount+":role/"+s.id(operator) {
		t.Errorf("JOBS_OPERATORS %q, want the operator role's ARN", operators)
	}
	defer func() {
		if recover() == nil {
			t.Error("GrantInvoke with a JWT authorizer did not panic")
		}
	}()
	cfg.Name, cfg.JWT = "jwt", &JWTConfig{Issuer: "https://issuer.example.com", Audience: []string{"a"}}
	synth(t, cfg, func(stack awscdk.Stack, j *Jobs) {
		j.GrantInvoke(awsiam.NewRole(stack, jsii.String("Caller"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()}))
	})
}

// Each function, a lane's worker included, is told exactly the variables
// of the descriptor it reads (deploy.Var.Readers) that the construct
// sets: the environment is computed in one place (environments), from one
// value of each variable. Read in every test stack and the lanes stack.
func TestEachFunctionIsToldWhatItReads(t *testing.T) {
	check := func(stack string, resources map[string]map[string]any) {
		for id, r := range resources {
			env, _ := props(r)["Environment"].(map[string]any)
			vars, _ := env["Variables"].(map[string]any)
			fn, _ := vars[deploy.EnvFunction.Name].(string)
			if fn == "" {
				continue // not one of the seven (a CDK helper function, a team's)
			}
			for name := range vars {
				if v, ok := deploy.Lookup(name); ok && !v.ReadBy(fn) {
					t.Errorf("%s: %s (%s) is told %s, which it does not read", stack, id, fn, name)
				}
			}
			for _, v := range []*deploy.Var{deploy.EnvTable.Var, deploy.EnvPayloadKeyringSecret.Var, deploy.EnvPageTokenSecret.Var, deploy.EnvEventBus.Var, deploy.EnvScheduleGroup.Var} {
				if _, ok := vars[v.Name]; ok != v.ReadBy(fn) {
					t.Errorf("%s: %s (%s) told %s: %v, reads it: %v", stack, id, fn, v.Name, ok, v.ReadBy(fn))
				}
			}
		}
	}
	for name, e := range environments(t) {
		check(name, e.resources("AWS::Lambda::Function"))
	}
	lanes := map[string]map[string]any{}
	for id, r := range synthLanes(t).of("AWS::Lambda::Function") {
		lanes[id] = map[string]any{"Properties": r.Properties}
	}
	check("lanes", lanes)
}
