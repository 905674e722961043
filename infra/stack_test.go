package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/infra/jobsinfra"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// synthesized is one environment's stack, synthesized once for all tests.
type synthesized struct {
	cfg                   Config
	terminationProtection bool
	template              map[string]any
	nagErrors             []string
	nagWarns              []string
}

var envs = map[string]*synthesized{}

func TestMain(m *testing.M) {
	code, err := setup(m)
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "lambdajobs-infra-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	for _, f := range jobsinfra.FunctionNames {
		if err := os.MkdirAll(filepath.Join(dir, f), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dir, f, "bootstrap"), []byte("test "+f), 0o755); err != nil {
			return 0, err
		}
	}
	withSources := Dev
	withSources.Name = "sources"
	withSources.S3Sources = []S3Source{{BucketName: "uploads-example", Prefix: "incoming/"}}
	withSources.EventBridgeSource = []EventBridgeSource{{Sources: []string{"shop.orders"}, DetailTypes: []string{"OrderPlaced"}}}
	withSources.EnvelopeSenders = []string{"arn:aws:iam::123456789012:role/nightly-batch"}
	withJWT := Dev
	withJWT.Name = "jwt"
	withJWT.JWT = &JWTConfig{Issuer: "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE", Audience: []string{"client"},
		Scopes: map[string][]string{"POST /v1/batches": {"jobs/batch"}, "POST /v1/jobs": {"jobs/write"}}}
	withJWT.CORS = &CORSConfig{AllowOrigins: []string{"https://app.example.com"}}
	// Every event-source-mapping setting away from its default.
	tuned := Dev
	tuned.Name = "tuned"
	tuned.BatchSize, tuned.BatchWindow, tuned.MaxConcurrency = 100, 20*time.Second, 7
	// ...and every function setting.
	tuned.WorkerMemoryMB, tuned.APIMemoryMB, tuned.APITimeout, tuned.SweeperTimeout = 2048, 384, 20*time.Second, 90*time.Second
	tuned.Architecture = "x86_64"
	tuned.Tracing = true
	tuned.LogLevel = "WARN"
	tuned.Operators = []string{"arn:aws:iam::123456789012:role/oncall", "arn:aws:iam::123456789012:role/support"}
	tuned.KeyAdmins = []string{"arn:aws:iam::123456789012:role/security"}
	tuned.CustomerManagedKey = true
	tuned.Environment = map[string]string{"TEAM_SETTING": "all"}
	tuned.FunctionEnvironment = map[string]map[string]string{"worker": {"WORKER_ONLY": "1"}}
	prod := Prod
	prod.AlarmEmail = "oncall@example.com"
	for _, cfg := range []Config{Dev, prod, withSources, withJWT, tuned} {
		s, err := synth(cfg, dir, filepath.Join(dir, "cdk.out."+cfg.Name), "")
		if err != nil {
			return 0, fmt.Errorf("synth %s: %w", cfg.Name, err)
		}
		envs[cfg.Name] = s
	}
	// One bootstrap serving every function (lambdafn.Serve).
	single := Dev
	single.Name = "single"
	one := filepath.Join(dir, "one")
	if err := os.MkdirAll(one, 0o755); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(one, "bootstrap"), []byte("one main"), 0o755); err != nil {
		return 0, err
	}
	{
		cfg := single
		s, err := synth(cfg, dir, filepath.Join(dir, "cdk.out."+cfg.Name), one)
		if err != nil {
			return 0, fmt.Errorf("synth %s: %w", cfg.Name, err)
		}
		envs[cfg.Name] = s
	}
	return m.Run(), nil
}

func synth(cfg Config, bootstraps, outdir, bootstrap string) (s *synthesized, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(), Outdir: jsii.String(outdir)})
	applyChecks(app)
	props := &StackProps{Config: cfg, Bootstraps: bootstraps, ExampleKinds: cfg.Name != "prod", Schedules: schedulesFor(cfg.Name, cfg.Name != "prod")}
	if cfg.Name == "tuned" {
		// A team's own schedule: a cron in a time zone.
		props.Schedules = append(props.Schedules, jobs.Schedule{Name: "nightly-report", Expression: "cron(0 2 * * ? *)",
			TimeZone: "Europe/Paris", Kind: "report", Payload: []byte(`{}`), Overlap: jobs.OverlapSkip})
	}
	if bootstrap != "" {
		props.Bootstraps, props.Bootstrap = "", bootstrap
	}
	stack := NewJobsStack(app, "lambdajobs-"+cfg.Name, props)
	if cfg.Name == "sources" {
		// A team's own function that enqueues directly (transactional enqueue).
		orders := awslambda.NewFunction(stack.Stack, jsii.String("Orders"), &awslambda.FunctionProps{
			Runtime: awslambda.Runtime_PROVIDED_AL2023(), Architecture: awslambda.Architecture_ARM_64(),
			Handler: jsii.String("bootstrap"), Code: awslambda.Code_FromAsset(jsii.String(filepath.Join(bootstraps, "enqueue")), nil),
			Description: jsii.String("orders service"),
		})
		stack.GrantEnqueue(orders)
		// An operator's role that reads jobs straight from the table.
		reader := awsiam.NewRole(stack.Stack, jsii.String("Reader"), &awsiam.RoleProps{
			AssumedBy: awsiam.NewAccountRootPrincipal(), Description: jsii.String("job reader"),
		})
		stack.GrantReadJobs(reader)
		cdknag.NagSuppressions_AddResourceSuppressions(orders, &[]*cdknag.NagPackSuppression{
			{Id: jsii.String("AwsSolutions-IAM4"), Reason: jsii.String("a test stand-in for a team's own function")},
		}, jsii.Bool(true))
	}
	tmpl := assertions.Template_FromStack(stack.Stack, nil)
	s = &synthesized{cfg: cfg, template: *tmpl.ToJSON(), terminationProtection: *stack.Stack.TerminationProtection()}
	ann := assertions.Annotations_FromStack(stack.Stack)
	for _, msg := range *ann.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
		s.nagErrors = append(s.nagErrors, fmt.Sprintf("%s: %v", *msg.Id, msg.Entry.Data))
	}
	for _, msg := range *ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
		s.nagWarns = append(s.nagWarns, fmt.Sprintf("%s: %v", *msg.Id, msg.Entry.Data))
	}
	return s, nil
}

// cdkContext loads the feature flags from cdk.json (NewApp does not).
func cdkContext() *map[string]any {
	raw, err := os.ReadFile("cdk.json")
	if err != nil {
		panic(err)
	}
	var c struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		panic(err)
	}
	return &c.Context
}

// resources returns the template's resources of a type, by logical id.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.template["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestNagAwsSolutionsHasNoUnsuppressedErrors(t *testing.T) {
	for name, s := range envs {
		if len(s.nagErrors) > 0 {
			t.Errorf("%s: %d cdk-nag errors:\n%s", name, len(s.nagErrors), strings.Join(s.nagErrors, "\n"))
		}
		for _, w := range s.nagWarns {
			t.Logf("%s: warning %s", name, w)
		}
	}
}

func TestBothRoutesRequireAuthorization(t *testing.T) {
	for name, want := range map[string]string{"dev": "AWS_IAM", "prod": "AWS_IAM", "jwt": "JWT"} {
		routes := envs[name].resources("AWS::ApiGatewayV2::Route")
		got := map[string]string{}
		for _, r := range routes {
			p := props(r)
			got[p["RouteKey"].(string)], _ = p["AuthorizationType"].(string)
		}
		for _, key := range jobsinfra.RouteKeys {
			if got[key] != want {
				t.Errorf("%s: route %q authorization %q, want %s (routes %v)", name, key, got[key], want, got)
			}
		}
		if len(got) != len(jobsinfra.RouteKeys) {
			t.Errorf("%s: %d routes, want exactly %d: %v", name, len(got), len(jobsinfra.RouteKeys), got)
		}
	}
}

func TestApiHasAccessLogsAndThrottling(t *testing.T) {
	for name, s := range envs {
		stages := s.resources("AWS::ApiGatewayV2::Stage")
		if len(stages) != 1 {
			t.Fatalf("%s: %d stages", name, len(stages))
		}
		for _, st := range stages {
			p := props(st)
			logs, _ := p["AccessLogSettings"].(map[string]any)
			if logs == nil || logs["DestinationArn"] == nil || !strings.Contains(jsonOf(logs["Format"]), "$context.requestId") {
				t.Errorf("%s: access logs %v", name, logs)
			}
			route, _ := p["DefaultRouteSettings"].(map[string]any)
			if route == nil || route["ThrottlingRateLimit"] != s.cfg.ThrottleRate || route["ThrottlingBurstLimit"] != float64(s.cfg.ThrottleBurst) {
				t.Errorf("%s: throttling %v", name, route)
			}
		}
	}
}

// function finds a function's resource by its description.
func (s *synthesized) function(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, f := range s.resources("AWS::Lambda::Function") {
		if props(f)["Description"] == "lambdajobs "+s.cfg.Name+" "+name {
			return props(f)
		}
	}
	t.Fatalf("%s: no %s function", s.cfg.Name, name)
	return nil
}

func TestFunctionsRunTheBootstrapsOnArm(t *testing.T) {
	for name, s := range envs {
		for _, fn := range jobsinfra.FunctionNames {
			p := s.function(t, fn)
			arch := `["arm64"]`
			if s.cfg.Architecture == "x86_64" {
				arch = `["x86_64"]`
			}
			if p["Runtime"] != "provided.al2023" || jsonOf(p["Architectures"]) != arch || p["Handler"] != "bootstrap" {
				t.Errorf("%s %s: runtime %v arch %v handler %v", name, fn, p["Runtime"], p["Architectures"], p["Handler"])
			}
			if lc, _ := p["LoggingConfig"].(map[string]any); lc == nil || lc["LogFormat"] != "JSON" {
				t.Errorf("%s %s: logging %v", name, fn, p["LoggingConfig"])
			}
			// No key material in any environment: only the functions that
			// seal or open payloads know where the key ring is, and read it
			// at cold start.
			env := jsonOf(p["Environment"])
			if strings.Contains(env, "JOBS_PAYLOAD_SECRET") || strings.Contains(env, "JOBS_PAYLOAD_KEY\"") || strings.Contains(env, "resolve:secretsmanager") {
				t.Errorf("%s %s: key material in the environment: %s", name, fn, env)
			}
			if got, want := strings.Contains(env, "JOBS_PAYLOAD_KEYRING_SECRET"), fn == "enqueue" || fn == "worker"; got != want {
				t.Errorf("%s %s: knows the key ring %v, want %v", name, fn, got, want)
			}
		}
	}
}

func TestWorkerTimeoutReserveAndDeadlinesAgree(t *testing.T) {
	for name, s := range envs {
		w := s.function(t, "worker")
		timeout := w["Timeout"].(float64)
		vars := w["Environment"].(map[string]any)["Variables"].(map[string]any)
		reserve := parseDur(t, vars["JOBS_HANDLER_RESERVE"].(string))
		write := parseDur(t, vars["JOBS_FINAL_WRITE_TIMEOUT"].(string))
		grace := parseDur(t, vars["JOBS_DISPATCH_GRACE"].(string))
		switch {
		case reserve < write+0.5:
			t.Errorf("%s: reserve %gs does not cover the final write %gs plus 0.5s", name, reserve, write)
		case timeout <= 2*reserve:
			t.Errorf("%s: worker timeout %gs leaves handlers less than half after the reserve %gs", name, timeout, reserve)
		case grace <= timeout:
			t.Errorf("%s: dispatch grace %gs does not exceed the worker timeout %gs", name, grace, timeout)
		}
		if timeout != s.cfg.WorkerTimeout.Seconds() {
			t.Errorf("%s: worker timeout %g, config %v", name, timeout, s.cfg.WorkerTimeout)
		}
		// The worker knows its timeout, to refuse a kind whose minimum run
		// time its invocations cannot give (jobs.WorkerConfig.Timeout).
		if got, _ := vars["JOBS_WORKER_TIMEOUT"].(string); got == "" || parseDur(t, got) != timeout {
			t.Errorf("%s: the worker's JOBS_WORKER_TIMEOUT is %q, want its timeout %gs", name, got, timeout)
		}
	}
}

func parseDur(t *testing.T, s string) float64 {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d.Seconds()
}

func TestQueuePair(t *testing.T) {
	for name, s := range envs {
		worker := s.function(t, "worker")["Timeout"].(float64)
		queues := s.resources("AWS::SQS::Queue")
		for id := range queues {
			if strings.Contains(id, "ScheduleDeadLetters") {
				delete(queues, id) // the schedules' DLQ: see TestSchedules
			}
		}
		if len(queues) != 2 {
			t.Fatalf("%s: %d queues", name, len(queues))
		}
		var main, dlq map[string]any
		for _, q := range queues {
			if props(q)["RedrivePolicy"] != nil {
				main = props(q)
			} else {
				dlq = props(q)
			}
		}
		if v := main["VisibilityTimeout"].(float64); v < 6*worker {
			t.Errorf("%s: visibility %gs < 6 x worker timeout %gs", name, v, worker)
		}
		if n := main["RedrivePolicy"].(map[string]any)["maxReceiveCount"].(float64); n < 5 {
			t.Errorf("%s: maxReceiveCount %g", name, n)
		}
		if dlq["MessageRetentionPeriod"] != float64(14*24*3600) {
			t.Errorf("%s: DLQ retention %v, want 14 days", name, dlq["MessageRetentionPeriod"])
		}
		for which, q := range map[string]map[string]any{"queue": main, "DLQ": dlq} {
			cmk := strings.Contains(jsonOf(q["KmsMasterKeyId"]), "JobsKey")
			if q["SqsManagedSseEnabled"] != true && !(s.cfg.CustomerManagedKey && cmk) {
				t.Errorf("%s: %s without SSE", name, which)
			}
		}
		// Enforced TLS: a Deny on aws:SecureTransport false for every queue
		// (both, and the schedules' DLQ).
		tls, want := 0, 3
		for _, p := range s.resources("AWS::SQS::QueuePolicy") {
			doc := jsonOf(props(p)["PolicyDocument"])
			if strings.Contains(doc, `"aws:SecureTransport":"false"`) && strings.Contains(doc, `"Effect":"Deny"`) {
				tls += len(props(p)["Queues"].([]any))
			}
		}
		if tls != want {
			t.Errorf("%s: TLS enforced on %d queues, want %d", name, tls, want)
		}
	}
}

func TestEventSourceReportsBatchItemFailures(t *testing.T) {
	for name, s := range envs {
		maps := s.resources("AWS::Lambda::EventSourceMapping")
		if len(maps) != 1 {
			t.Fatalf("%s: %d event source mappings", name, len(maps))
		}
		for _, m := range maps {
			p := props(m)
			if jsonOf(p["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` {
				t.Errorf("%s: response types %v", name, p["FunctionResponseTypes"])
			}
			if p["BatchSize"] != float64(s.cfg.BatchSize) || p["ScalingConfig"].(map[string]any)["MaximumConcurrency"] != float64(s.cfg.MaxConcurrency) {
				t.Errorf("%s: batch size %v scaling %v", name, p["BatchSize"], p["ScalingConfig"])
			}
			if window, _ := p["MaximumBatchingWindowInSeconds"].(float64); window != s.cfg.BatchWindow.Seconds() {
				t.Errorf("%s: batching window %v, want %v", name, p["MaximumBatchingWindowInSeconds"], s.cfg.BatchWindow.Seconds())
			}
		}
	}
}

func TestTablePerEnvironment(t *testing.T) {
	for name, s := range envs {
		tables := s.resources("AWS::DynamoDB::Table")
		if len(tables) != 1 {
			t.Fatalf("%s: %d tables", name, len(tables))
		}
		for _, tbl := range tables {
			p := props(tbl)
			if p["BillingMode"] != "PAY_PER_REQUEST" || jsonOf(p["TimeToLiveSpecification"]) != `{"AttributeName":"expires","Enabled":true}` {
				t.Errorf("%s: billing %v TTL %v", name, p["BillingMode"], p["TimeToLiveSpecification"])
			}
			gsi := jsonOf(p["GlobalSecondaryIndexes"])
			if !strings.Contains(gsi, `"IndexName":"sweep"`) || !strings.Contains(gsi, `"ProjectionType":"KEYS_ONLY"`) {
				t.Errorf("%s: index %s", name, gsi)
			}
			pitr := p["PointInTimeRecoverySpecification"].(map[string]any)["PointInTimeRecoveryEnabled"]
			retained := tbl["DeletionPolicy"] == "Retain" && tbl["UpdateReplacePolicy"] == "Retain"
			if name == "prod" {
				if !retained || pitr != true || p["DeletionProtectionEnabled"] != true {
					t.Errorf("prod: retained %v, PITR %v, deletion protection %v", retained, pitr, p["DeletionProtectionEnabled"])
				}
			} else if tbl["DeletionPolicy"] != "Delete" || pitr == true {
				t.Errorf("%s: deletion policy %v, PITR %v", name, tbl["DeletionPolicy"], pitr)
			}
		}
	}
}

func TestNoWildcardActionsAndLeastPrivilege(t *testing.T) {
	for name, s := range envs {
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
			"enqueue": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:PutItem dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents secretsmanager:GetSecretValue sqs:SendMessage",
			// getjob also lists (Query the listing indexes, BatchGetItem the
			// jobs) and reads the page token key; cancel also retries.
			"getjob": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:Query logs:CreateLogStream logs:PutLogEvents secretsmanager:GetSecretValue",
			// ...and ends a batch whose last job it cancels (PutItem: the
			// completion job), and serves the operators' dead-letter routes.
			"cancel": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:PutItem dynamodb:Query dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents " +
				"secretsmanager:GetSecretValue sqs:ChangeMessageVisibility sqs:DeleteMessage sqs:GetQueueAttributes sqs:ReceiveMessage sqs:SendMessage",
			"sweeper": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:PutItem dynamodb:Query dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents sqs:SendMessage",
			"worker": "dynamodb:BatchGetItem dynamodb:GetItem dynamodb:PutItem dynamodb:UpdateItem logs:CreateLogStream logs:PutLogEvents secretsmanager:GetSecretValue " +
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
			if managed := props(role)["ManagedPolicyArns"]; managed != nil && !strings.Contains(id, "BucketNotificationsHandler") && !strings.HasPrefix(id, "Orders") {
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

func TestSweeperScheduleWithoutRetries(t *testing.T) {
	for name, s := range envs {
		found := false
		for _, r := range s.resources("AWS::Events::Rule") {
			p := props(r)
			if p["ScheduleExpression"] == "rate(1 minute)" {
				found = true
				if !strings.Contains(jsonOf(p["Targets"]), `"MaximumRetryAttempts":0`) {
					t.Errorf("%s: schedule target retries: %s", name, jsonOf(p["Targets"]))
				}
			}
		}
		if !found {
			t.Errorf("%s: no one-minute schedule", name)
		}
		for _, c := range s.resources("AWS::Lambda::EventInvokeConfig") {
			if props(c)["MaximumRetryAttempts"] != float64(0) {
				t.Errorf("%s: async retries %v", name, props(c)["MaximumRetryAttempts"])
			}
		}
	}
}

func TestEveryAlarm(t *testing.T) {
	for name, s := range envs {
		alarms := s.resources("AWS::CloudWatch::Alarm")
		got := map[string]int{}
		metricName := regexp.MustCompile(`"MetricName":"([^"]+)"`)
		for _, a := range alarms {
			p := props(a)
			if !strings.Contains(jsonOf(p["AlarmActions"]), "Alarms") || !strings.Contains(jsonOf(p["OKActions"]), "Alarms") {
				t.Errorf("%s: alarm %s does not notify the topic on alarm and on OK", name, p["AlarmDescription"])
			}
			for _, m := range metricName.FindAllStringSubmatch(jsonOf(p), -1) {
				got[m[1]]++
			}
			if strings.Contains(jsonOf(p), "Invocations") && (p["TreatMissingData"] != "breaching" || p["ComparisonOperator"] != "LessThanThreshold") {
				t.Errorf("%s: the sweeper heartbeat must fire when the sweeper does not run: %s", name, jsonOf(p))
			}
			// The dead-letter alarms fire on growth (not staying in ALARM while
			// old messages sit), and on the first dead letter after a quiet
			// spell: SQS publishes no data for an idle queue, which FILL
			// counts as 0 (RATE over the gap never reached the threshold).
			if strings.Contains(jsonOf(p), "ApproximateNumberOfMessagesVisible") &&
				(!strings.Contains(jsonOf(p), `"Expression":"`+jobsinfra.DLQGrowthExpression+`"`) || jobsinfra.DLQGrowthExpression != "DIFF(FILL(dlq, 0))" || p["Threshold"] != 1.0) {
				t.Errorf("%s: the DLQ alarm must fire on growth after any quiet spell: %s", name, jsonOf(p))
			}
		}
		want := map[string]int{"ApproximateNumberOfMessagesVisible": 1, "ApproximateAgeOfOldestMessage": 1, "Errors": 5, "Throttles": 1,
			"Invocations": 1, "ThrottledRequests": 5, "5xx": 1, "Latency": 1,
			"JobsInterrupted": 2, "JobsTimedOut": 1, "JobsFailed": 1, "QueueLatency": 1, "SweepComplete": 1}
		for m, n := range want {
			if got[m] < n {
				t.Errorf("%s: %d alarm metrics %s, want %d (have %v)", name, got[m], m, n, got)
			}
		}
		// The job alarms read the functions' own metrics (EMF) in the
		// environment's namespace, by service: no log metric filters.
		if filters := s.resources("AWS::Logs::MetricFilter"); len(filters) != 0 {
			t.Errorf("%s: metric filters %s", name, jsonOf(filters))
		}
		if !strings.Contains(jsonOf(alarms), `"Namespace":"lambdajobs/`+s.cfg.Name+`"`) {
			t.Errorf("%s: no alarm on the environment's own metrics", name)
		}
	}
}

// An environment that retains data cannot synthesize without somebody to
// alarm, and cannot be deleted in one step.
func TestRetainedEnvironmentsNeedAlarmsAndTerminationProtection(t *testing.T) {
	if err := Prod.Validate(); err == nil || !strings.Contains(err.Error(), "alarm destination") {
		t.Fatalf("prod without an alarm destination: %v", err)
	}
	for name, s := range envs {
		if s.terminationProtection != s.cfg.Retain {
			t.Errorf("%s: termination protection %v, want %v", name, s.terminationProtection, s.cfg.Retain)
		}
	}
}

// The worker's deliberate loop (retries and early deliveries sent back to
// its own trigger queue) is allowed; the sweeper runs one at a time; the
// queue's visibility covers six worker timeouts and the batching window.
func TestLoopsOverlapAndVisibility(t *testing.T) {
	for name, s := range envs {
		if p := s.function(t, "worker"); p["RecursiveLoop"] != "Allow" {
			t.Errorf("%s: worker recursive loop %v, want Allow", name, p["RecursiveLoop"])
		}
		if p := s.function(t, "sweeper"); p["ReservedConcurrentExecutions"] != float64(1) {
			t.Errorf("%s: sweeper reserved concurrency %v, want 1", name, p["ReservedConcurrentExecutions"])
		}
		want := (6*s.cfg.WorkerTimeout + s.cfg.BatchWindow).Seconds()
		for _, q := range s.resources("AWS::SQS::Queue") {
			if v, ok := props(q)["VisibilityTimeout"]; ok && v != want {
				t.Errorf("%s: visibility %v, want %v", name, v, want)
			}
		}
	}
}

// Access logs come from the stage's own settings with the error and
// latency fields; batch creation has its own, tighter throttle.
func TestStageLogsAndBatchThrottle(t *testing.T) {
	for name, s := range envs {
		for _, st := range s.resources("AWS::ApiGatewayV2::Stage") {
			p := props(st)
			format := jsonOf(p["AccessLogSettings"])
			for _, f := range []string{"integrationLatency", "error.message", "authorizer.error", "integrationErrorMessage"} {
				if !strings.Contains(format, f) {
					t.Errorf("%s: access log format lacks %s: %s", name, f, format)
				}
			}
			rs := jsonOf(p["RouteSettings"])
			if !strings.Contains(rs, "POST /v1/batches") || !strings.Contains(rs, fmt.Sprintf(`"ThrottlingRateLimit":%v`, s.cfg.BatchThrottleRate)) {
				t.Errorf("%s: route settings %s", name, rs)
			}
		}
	}
}

func TestOutputs(t *testing.T) {
	for name, s := range envs {
		outputs := s.template["Outputs"].(map[string]any)
		for _, o := range []string{"ApiUrl", "TableName", "QueueUrl", "DeadLetterQueueUrl"} {
			if outputs[o] == nil {
				t.Errorf("%s: no output %s", name, o)
			}
		}
	}
}

func TestForeignSourcesAreScopedToTheirARN(t *testing.T) {
	s := envs["sources"]
	var allows []string
	for _, p := range s.resources("AWS::SQS::QueuePolicy") {
		for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			stmt := st.(map[string]any)
			if stmt["Effect"] == "Allow" {
				allows = append(allows, jsonOf(stmt))
			}
		}
	}
	var s3, events bool
	for _, a := range allows {
		switch {
		case strings.Contains(a, "s3.amazonaws.com"):
			s3 = strings.Contains(a, "aws:SourceArn") && strings.Contains(a, "uploads-example")
		case strings.Contains(a, "events.amazonaws.com"):
			events = strings.Contains(a, "aws:SourceArn") && strings.Contains(a, "Source0Rule")
		default:
			t.Errorf("an Allow for someone else: %s", a)
		}
	}
	if !s3 || !events {
		t.Errorf("queue policy allows (s3 scoped %v, events scoped %v):\n%s", s3, events, strings.Join(allows, "\n"))
	}
	if policy := jsonOf(s.resources("AWS::SQS::QueuePolicy")); !strings.Contains(policy, `"Sid":"S3FromThisAccountOnly"`) ||
		!strings.Contains(policy, `"aws:SourceAccount":{"Ref":"AWS::AccountId"}`) {
		t.Errorf("S3 may send for buckets of other accounts: %s", policy)
	}
	rules := jsonOf(s.resources("AWS::Events::Rule"))
	if !strings.Contains(rules, `"source":["shop.orders"]`) || !strings.Contains(rules, `"detail-type":["OrderPlaced"]`) {
		t.Errorf("rules %s", rules)
	}
	notif := jsonOf(s.resources("Custom::S3BucketNotifications"))
	if !strings.Contains(notif, "uploads-example") || !strings.Contains(notif, "incoming/") {
		t.Errorf("bucket notifications %s", notif)
	}
	// Without sources, nobody else may send.
	for _, p := range envs["dev"].resources("AWS::SQS::QueuePolicy") {
		if strings.Contains(jsonOf(props(p)), `"Effect":"Allow"`) {
			t.Errorf("dev: the queue policy allows a sender: %s", jsonOf(props(p)))
		}
	}
}

func TestConfigFor(t *testing.T) {
	if c, err := ConfigFor("staging"); err != nil || c.Name != "staging" || c.Retain {
		t.Fatalf("staging: %+v %v", c, err)
	}
	if c, err := ConfigFor("prod"); err == nil || !c.Retain || !strings.Contains(err.Error(), "alarm destination") {
		t.Fatalf("prod without an alarm destination: %+v %v, want it refused", c, err)
	}
	for _, bad := range []string{"", "Prod", "has space", strings.Repeat("a", 21)} {
		if _, err := ConfigFor(bad); err == nil {
			t.Errorf("ConfigFor(%q) accepted", bad)
		}
	}
	broken := Dev
	broken.HandlerReserve = broken.FinalWriteTimeout
	if broken.Validate() == nil {
		t.Error("a reserve that does not cover the final write was accepted")
	}
	broken = Dev
	broken.DispatchGrace = broken.WorkerTimeout
	if broken.Validate() == nil {
		t.Error("a dispatch grace within the worker timeout was accepted")
	}
}

func TestGrantEnqueue(t *testing.T) {
	s := envs["sources"]
	var fn map[string]any
	for _, f := range s.resources("AWS::Lambda::Function") {
		if props(f)["Description"] == "orders service" {
			fn = props(f)
		}
	}
	if fn == nil {
		t.Fatal("no orders function")
	}
	vars := jsonOf(fn["Environment"])
	for _, v := range []string{"JOBS_TABLE", "JOBS_QUEUE_URL", "JOBS_DISPATCH_GRACE", "JOBS_PAYLOAD_KEYRING_SECRET"} {
		if !strings.Contains(vars, v) {
			t.Errorf("orders function lacks %s: %s", v, vars)
		}
	}
	role := fn["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
	var actions []string
	for _, pol := range s.resources("AWS::IAM::Policy") {
		if !strings.Contains(jsonOf(props(pol)["Roles"]), role) {
			continue
		}
		for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			actions = append(actions, jsonOf(st.(map[string]any)["Action"]))
		}
	}
	if got := strings.Join(actions, " "); got != `"dynamodb:PutItem" "sqs:SendMessage" "secretsmanager:GetSecretValue"` {
		t.Errorf("orders function may %s, want exactly PutItem, SendMessage and reading the key ring", got)
	}
}

// The demo kinds (example.fail panics or overruns on purpose) are switched
// on in dev and never in a prod synthesis unless opted in.
func TestExampleKindsNeverInProd(t *testing.T) {
	for name, s := range envs {
		fns := s.resources("AWS::Lambda::Function")
		on := 0
		for _, f := range fns {
			if strings.Contains(jsonOf(props(f)["Environment"]), "JOBS_EXAMPLE_KINDS") {
				on++
			}
		}
		switch {
		case name == "prod" && on != 0:
			t.Errorf("prod: %d functions serve the example kinds", on)
		case name == "dev" && on != len(jobsinfra.FunctionNames):
			t.Errorf("dev: %d of %d functions serve the example kinds", on, len(jobsinfra.FunctionNames))
		}
	}
}

// The worker learns the sources connected to its queue, so that it refuses
// to start when its routes do not cover one of them.
func TestWorkerKnowsItsSources(t *testing.T) {
	for name, s := range envs {
		var env string
		for _, f := range s.resources("AWS::Lambda::Function") {
			if strings.HasSuffix(fmt.Sprint(props(f)["Description"]), " worker") {
				env = jsonOf(props(f)["Environment"])
			}
		}
		want := name == "sources"
		if got := strings.Contains(env, "JOBS_SOURCES"); got != want {
			t.Errorf("%s: worker has JOBS_SOURCES %v, want %v (%s)", name, got, want, env)
		}
		if want && (!strings.Contains(env, `\"bucket\":\"uploads-example\"`) || !strings.Contains(env, `\"detail_type\":\"OrderPlaced\"`)) {
			t.Errorf("%s: worker sources %s", name, env)
		}
	}
}

func TestGrantReadJobs(t *testing.T) {
	s := envs["sources"]
	var readerRole string
	for id, r := range s.resources("AWS::IAM::Role") {
		if props(r)["Description"] == "job reader" {
			readerRole = id
		}
	}
	var actions []string
	for _, pol := range s.resources("AWS::IAM::Policy") {
		if !strings.Contains(jsonOf(props(pol)["Roles"]), readerRole) {
			continue
		}
		for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			actions = append(actions, jsonOf(st.(map[string]any)["Action"]))
		}
	}
	if readerRole == "" || strings.Join(actions, " ") != `"dynamodb:GetItem"` {
		t.Errorf("reader role %q may %v, want exactly dynamodb:GetItem", readerRole, actions)
	}
}

// Every function knows its role, so one bootstrap (lambdafn.Serve) can
// serve all six; with one bootstrap, one asset.
func TestEveryFunctionKnowsItsRole(t *testing.T) {
	for name, s := range envs {
		roles := map[string]bool{}
		assets := map[string]bool{}
		for _, f := range s.resources("AWS::Lambda::Function") {
			p := props(f)
			desc := fmt.Sprint(p["Description"])
			if !strings.HasPrefix(desc, "lambdajobs ") {
				continue // a team's own function
			}
			role := desc[strings.LastIndexByte(desc, ' ')+1:]
			if !strings.Contains(jsonOf(p["Environment"]), `"JOBS_FUNCTION":"`+role+`"`) {
				t.Errorf("%s: %s lacks JOBS_FUNCTION=%s", name, desc, role)
			}
			roles[role] = true
			assets[jsonOf(p["Code"])] = true
		}
		if len(roles) != len(jobsinfra.FunctionNames) {
			t.Errorf("%s: roles %v", name, roles)
		}
		if want := map[bool]int{true: 1, false: len(jobsinfra.FunctionNames)}[name == "single"]; len(assets) != want {
			t.Errorf("%s: %d assets, want %d", name, len(assets), want)
		}
	}
}

// Every function setting of Config reaches the template.
func TestFunctionSettingsReachTheTemplate(t *testing.T) {
	s := envs["tuned"]
	seen := 0
	for _, f := range s.resources("AWS::Lambda::Function") {
		p := props(f)
		desc := fmt.Sprint(p["Description"])
		role := desc[strings.LastIndexByte(desc, ' ')+1:]
		env := jsonOf(p["Environment"])
		wantMem, wantTimeout := float64(s.cfg.APIMemoryMB), s.cfg.APITimeout.Seconds()
		switch role {
		case "worker":
			wantMem, wantTimeout = float64(s.cfg.WorkerMemoryMB), s.cfg.WorkerTimeout.Seconds()
		case "sweeper":
			wantTimeout = s.cfg.SweeperTimeout.Seconds()
		}
		if p["MemorySize"] != wantMem || p["Timeout"] != wantTimeout {
			t.Errorf("%s: memory %v timeout %v, want %v and %v", desc, p["MemorySize"], p["Timeout"], wantMem, wantTimeout)
		}
		if jsonOf(p["Architectures"]) != `["x86_64"]` || !strings.Contains(env, `"TEAM_SETTING":"all"`) {
			t.Errorf("%s: architectures %v environment %s", desc, p["Architectures"], env)
		}
		if got := strings.Contains(env, "WORKER_ONLY"); got != (role == "worker") {
			t.Errorf("%s: WORKER_ONLY present %v", desc, got)
		}
		seen++
	}
	if seen != len(jobsinfra.FunctionNames) {
		t.Fatalf("%d functions", seen)
	}
}

func TestConfigRefusesReservedEnvironment(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"reserved":     func(c *Config) { c.Environment = map[string]string{"JOBS_TABLE": "other"} },
		"aws":          func(c *Config) { c.FunctionEnvironment = map[string]map[string]string{"worker": {"AWS_REGION": "x"}} },
		"unknown fn":   func(c *Config) { c.FunctionEnvironment = map[string]map[string]string{"wroker": {"A": "1"}} },
		"architecture": func(c *Config) { c.Architecture = "arm" },
		"log level":    func(c *Config) { c.LogLevel = "warn" },
	} {
		c := Dev
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Every environment but prod fires example.tick through EventBridge
// Scheduler: a group per environment, one schedule per declared periodic
// job with its expression and time zone and no flexible window, a target
// input carrying the schedule's name and Scheduler's scheduled time, the
// schedules' own DLQ with an alarm, and a role that Scheduler alone
// assumes, for this account, which may only send to the queue and that DLQ.
func TestSchedules(t *testing.T) {
	for name, s := range envs {
		schedules := s.resources("AWS::Scheduler::Schedule")
		groups := map[string]bool{}
		for _, g := range s.resources("AWS::Scheduler::ScheduleGroup") {
			groups[props(g)["Name"].(string)] = true
		}
		if len(groups) != 2 || !groups["lambdajobs-"+name] || !groups["lambdajobs-"+name+"-runtime"] {
			t.Fatalf("%s: schedule groups %v", name, groups)
		}
		want := map[string][2]string{"example.tick": {"rate(1 minute)", "UTC"}}
		if name == "prod" {
			want = map[string][2]string{}
		}
		if name == "tuned" {
			want["nightly-report"] = [2]string{"cron(0 2 * * ? *)", "Europe/Paris"}
		}
		if len(schedules) != len(want) {
			t.Fatalf("%s: %d schedules, want %d", name, len(schedules), len(want))
		}
		dlqID, roleID := "", ""
		for id := range s.resources("AWS::SQS::Queue") {
			if strings.Contains(id, "ScheduleDeadLetters") {
				dlqID = id
			}
		}
		for id := range s.resources("AWS::IAM::Role") {
			if strings.Contains(id, "SchedulerRole") {
				roleID = id
			}
		}
		if dlqID == "" || roleID == "" {
			t.Fatalf("%s: no schedule DLQ (%q) or scheduler role (%q)", name, dlqID, roleID)
		}
		for _, sc := range schedules {
			p := props(sc)
			w, ok := want[p["Name"].(string)]
			if !ok || p["ScheduleExpression"] != w[0] || p["ScheduleExpressionTimezone"] != w[1] || p["State"] != "ENABLED" ||
				jsonOf(p["FlexibleTimeWindow"]) != `{"Mode":"OFF"}` {
				t.Errorf("%s: schedule %s", name, jsonOf(p))
			}
			target := p["Target"].(map[string]any)
			input := target["Input"].(string)
			// Scheduler substitutes the literal context attribute: it must
			// not be JSON-escaped (\u003c...).
			if input != wire.FireMessage(p["Name"].(string), "<aws.scheduler.scheduled-time>") || !strings.Contains(input, `"scheduled_time":"<aws.scheduler.scheduled-time>"`) {
				t.Errorf("%s: target input %s", name, input)
			}
			if !strings.Contains(jsonOf(target["Arn"]), "JobsQueue") || !strings.Contains(jsonOf(target["RoleArn"]), roleID) ||
				!strings.Contains(jsonOf(target["DeadLetterConfig"]), dlqID) ||
				jsonOf(target["RetryPolicy"]) != `{"MaximumEventAgeInSeconds":3600,"MaximumRetryAttempts":185}` {
				t.Errorf("%s: target %s", name, jsonOf(target))
			}
		}
		role := props(s.resources("AWS::IAM::Role")[roleID])
		trust := jsonOf(role["AssumeRolePolicyDocument"])
		if !strings.Contains(trust, `"Service":"scheduler.amazonaws.com"`) || !strings.Contains(trust, "aws:SourceAccount") ||
			!strings.Contains(trust, ":schedule/lambdajobs-"+name+"/*") || !strings.Contains(trust, ":schedule/lambdajobs-"+name+"-runtime/*") {
			t.Errorf("%s: scheduler role trust %s", name, trust)
		}
		// It may send to the queue and the schedules' DLQ, and nothing
		// else (but use the key that encrypts them, if there is one).
		sendsTo := map[string]bool{}
		for _, pol := range s.resources("AWS::IAM::Policy") {
			p := props(pol)
			if !strings.Contains(jsonOf(p["Roles"]), roleID) {
				continue
			}
			for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				stmt := st.(map[string]any)
				action, res := jsonOf(stmt["Action"]), jsonOf(stmt["Resource"])
				switch {
				case action == `"sqs:SendMessage"`:
					resources, ok := stmt["Resource"].([]any)
					if !ok {
						resources = []any{stmt["Resource"]}
					}
					for _, r := range resources {
						if r := jsonOf(r); strings.Count(r, "Fn::GetAtt") == 1 && (strings.Contains(r, "JobsQueue") || strings.Contains(r, dlqID)) {
							sendsTo[r] = true
						} else {
							t.Errorf("%s: scheduler role may send to %s", name, r)
						}
					}
				case s.cfg.CustomerManagedKey && action == `["kms:Decrypt","kms:GenerateDataKey"]` && strings.Contains(res, "JobsKey"):
				default:
					t.Errorf("%s: scheduler role may %s on %s", name, action, res)
				}
			}
		}
		if len(sendsTo) != 2 {
			t.Errorf("%s: scheduler role sends to %v, want the queue and the schedules' DLQ", name, sendsTo)
		}
		if _, ok := s.resources("AWS::CloudWatch::Alarm")["ScheduleDeadLettersAlarm"]; !ok {
			found := false
			for id := range s.resources("AWS::CloudWatch::Alarm") {
				found = found || strings.Contains(id, "ScheduleDeadLettersAlarm")
			}
			if !found {
				t.Errorf("%s: no alarm on the schedules' DLQ", name)
			}
		}
		// The schedules function changes only the runtime group's schedules
		// and passes only the scheduler's role, to Scheduler only.
		var fnRole string
		for id, r := range s.resources("AWS::Lambda::Function") {
			_ = id
			if props(r)["Description"] == "lambdajobs "+name+" schedules" {
				fnRole = jsonOf(props(r)["Role"])
			}
		}
		var schedStmts []string
		for _, pol := range s.resources("AWS::IAM::Policy") {
			p := props(pol)
			if fnRole == "" || !strings.Contains(fnRole, strings.Trim(jsonOf(p["Roles"]), `[]{}"Ref:`)) {
				continue
			}
			for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				schedStmts = append(schedStmts, jsonOf(st))
			}
		}
		all := strings.Join(schedStmts, "\n")
		if !strings.Contains(all, `"Action":["scheduler:CreateSchedule","scheduler:DeleteSchedule","scheduler:GetSchedule","scheduler:UpdateSchedule"]`) ||
			!strings.Contains(all, ":schedule/lambdajobs-"+name+"-runtime/*") || strings.Contains(all, ":schedule/lambdajobs-"+name+"/*") ||
			!strings.Contains(all, `"iam:PassedToService":"scheduler.amazonaws.com"`) || !strings.Contains(all, roleID) {
			t.Errorf("%s: the schedules function may:\n%s", name, all)
		}
		// The queue lets the scheduler's role send.
		for _, qp := range s.resources("AWS::SQS::QueuePolicy") {
			if pol := jsonOf(props(qp)["PolicyDocument"]); strings.Contains(pol, "OnlyKnownSenders") && !strings.Contains(pol, roleID) {
				t.Errorf("%s: the queue policy denies the scheduler's role", name)
			}
		}
	}
}

// Every function logs in JSON at the configured application level (INFO
// unless set), which aws-lambda-go's logger reads from AWS_LAMBDA_LOG_LEVEL.
func TestLogLevel(t *testing.T) {
	for name, s := range envs {
		want := s.cfg.LogLevel
		if want == "" {
			want = "INFO"
		}
		for _, fn := range jobsinfra.FunctionNames {
			lc := jsonOf(s.function(t, fn)["LoggingConfig"])
			if !strings.Contains(lc, `"ApplicationLogLevel":"`+want+`"`) || !strings.Contains(lc, `"LogFormat":"JSON"`) {
				t.Errorf("%s %s: logging %s, want JSON at %s", name, fn, lc, want)
			}
		}
	}
}

// JWT routes carry the scopes asked of them; CORS is off unless asked.
func TestJWTScopesAndCORS(t *testing.T) {
	for name, s := range envs {
		for _, r := range s.resources("AWS::ApiGatewayV2::Route") {
			p := props(r)
			scopes := jsonOf(p["AuthorizationScopes"])
			switch key := p["RouteKey"]; {
			case name == "jwt" && key == "POST /v1/batches" && scopes != `["jobs/batch"]`,
				name == "jwt" && key == "POST /v1/jobs" && scopes != `["jobs/write"]`,
				name == "jwt" && key == "GET /v1/jobs/{id}" && scopes != "null",
				name != "jwt" && scopes != "null":
				t.Errorf("%s: %v has scopes %s", name, key, scopes)
			}
		}
		for _, a := range s.resources("AWS::ApiGatewayV2::Api") {
			cors := jsonOf(props(a)["CorsConfiguration"])
			if got := strings.Contains(cors, "https://app.example.com"); got != (name == "jwt") {
				t.Errorf("%s: CORS %s", name, cors)
			}
		}
	}
}

// Only known principals may send to the queue: the construct's own senders,
// functions given GrantEnqueue, configured envelope senders, and AWS
// services for configured sources (aws:SourceArn present).
func TestQueueDeniesUnknownSenders(t *testing.T) {
	for name, s := range envs {
		var deny map[string]any
		for _, p := range s.resources("AWS::SQS::QueuePolicy") {
			for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
				if stmt := st.(map[string]any); stmt["Sid"] == "OnlyKnownSenders" {
					deny = stmt
				}
			}
		}
		if deny == nil || deny["Effect"] != "Deny" || jsonOf(deny["Principal"]) != `{"AWS":"*"}` || deny["Action"] != "sqs:SendMessage" {
			t.Fatalf("%s: no deny of unknown senders: %s", name, jsonOf(deny))
		}
		cond := jsonOf(deny["Condition"])
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

// The app refuses to synthesize prod without an alarm destination or
// unpinned to an account and region, and pins it when told.
func TestAppPinsProd(t *testing.T) {
	dir := t.TempDir()
	for _, f := range jobsinfra.FunctionNames {
		if err := os.MkdirAll(filepath.Join(dir, f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f, "bootstrap"), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CDK_DEFAULT_ACCOUNT", "")
	t.Setenv("CDK_DEFAULT_REGION", "")
	app := func(ctx map[string]any) awscdk.App {
		c := cdkContext()
		for k, v := range ctx {
			(*c)[k] = v
		}
		(*c)["bootstraps"] = dir
		return awscdk.NewApp(&awscdk.AppProps{Context: c, Outdir: jsii.String(t.TempDir())})
	}
	if err := build(app(map[string]any{"env": "prod", "account": "123456789012", "region": "us-east-1"})); err == nil || !strings.Contains(err.Error(), "alarm destination") {
		t.Errorf("prod without alarms: %v", err)
	}
	if err := build(app(map[string]any{"env": "prod", "alarmEmail": "oncall@example.com"})); err == nil || !strings.Contains(err.Error(), "pinned") {
		t.Errorf("prod unpinned: %v", err)
	}
	a := app(map[string]any{"env": "prod", "alarmEmail": "oncall@example.com", "account": "123456789012", "region": "us-east-1"})
	applyChecks(a)
	if err := build(a); err != nil {
		t.Fatal(err)
	}
	stack := a.Node().FindChild(jsii.String("lambdajobs-prod")).(awscdk.Stack)
	// Pinned, ARNs hold the literal account and region: the nag
	// suppressions must still apply.
	for _, msg := range *assertions.Annotations_FromStack(stack).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
		t.Errorf("pinned prod: cdk-nag: %s: %v", *msg.Id, msg.Entry.Data)
	}
	if *stack.Account() != "123456789012" || *stack.Region() != "us-east-1" || !*stack.TerminationProtection() {
		t.Errorf("prod stack: account %s region %s termination protection %v", *stack.Account(), *stack.Region(), *stack.TerminationProtection())
	}
	if err := build(app(map[string]any{"env": "staging"})); err != nil {
		t.Errorf("a non-retained environment needs no pin: %v", err)
	}
}

// One dashboard per environment, over the functions' own metrics, and every
// function writes them.
func TestDashboardAndMetrics(t *testing.T) {
	for name, s := range envs {
		boards := s.resources("AWS::CloudWatch::Dashboard")
		if len(boards) != 1 {
			t.Fatalf("%s: %d dashboards", name, len(boards))
		}
		body := jsonOf(boards)
		for _, w := range []string{"Jobs succeeded per minute, by kind", "Jobs failed per minute, by kind and code",
			"Run duration p50 and p99", "Queue latency p50 and p99", "Queue depth and oldest message age", "Dead-letter queue depth",
			"Function errors", "Function throttles", "Sweeper: re-sent", "Sweeper: duration"} {
			if !strings.Contains(body, w) {
				t.Errorf("%s: the dashboard lacks %q", name, w)
			}
		}
		if !strings.Contains(body, "lambdajobs/"+s.cfg.Name) {
			t.Errorf("%s: the dashboard does not read the environment's namespace", name)
		}
		for _, fn := range jobsinfra.FunctionNames {
			if env := jsonOf(s.function(t, fn)["Environment"]); !strings.Contains(env, `"JOBS_METRICS_NAMESPACE":"lambdajobs/`+s.cfg.Name+`"`) {
				t.Errorf("%s %s: no metrics namespace: %s", name, fn, env)
			}
		}
	}
}

// Tracing is off by default (it costs per trace) and active on every
// function when asked for, with the X-Ray write permissions and the
// functions' own spans switched on.
func TestTracing(t *testing.T) {
	for name, s := range envs {
		for _, fn := range jobsinfra.FunctionNames {
			mode := jsonOf(s.function(t, fn)["TracingConfig"])
			if on := strings.Contains(mode, `"Active"`); on != s.cfg.Tracing {
				t.Errorf("%s %s: tracing %s, want on=%v", name, fn, mode, s.cfg.Tracing)
			}
			env := jsonOf(s.function(t, fn)["Environment"])
			if on := strings.Contains(env, `"JOBS_TRACING":"on"`); on != s.cfg.Tracing {
				t.Errorf("%s %s: JOBS_TRACING in %s, want on=%v", name, fn, env, s.cfg.Tracing)
			}
		}
		if got := strings.Contains(jsonOf(s.resources("AWS::IAM::Policy")), "xray:PutTraceSegments"); got != s.cfg.Tracing {
			t.Errorf("%s: X-Ray permissions %v, want %v", name, got, s.cfg.Tracing)
		}
	}
}

// Operators reach the admin routes: the functions behind them are told
// who the operators are; nobody is, unless configured.
func TestOperators(t *testing.T) {
	for name, s := range envs {
		for _, fn := range []string{"getjob", "cancel"} {
			env := jsonOf(s.function(t, fn)["Environment"])
			want := len(s.cfg.Operators) > 0
			if got := strings.Contains(env, `"JOBS_OPERATORS":"arn:aws:iam::123456789012:role/oncall,arn:aws:iam::123456789012:role/support"`); got != want {
				t.Errorf("%s %s: JOBS_OPERATORS present %v, want %v: %s", name, fn, got, want, env)
			}
		}
	}
}

// The listing's two indexes, each projecting only what never changes
// under its entries (so an entry is written once), and who may read them:
// getjob and cancel query only those two, and read the page token key.
func TestListingIndexesAndGrants(t *testing.T) {
	for name, s := range envs {
		var table map[string]any
		for _, r := range s.resources("AWS::DynamoDB::Table") {
			table = props(r)
		}
		gsis := map[string]string{}
		for _, g := range table["GlobalSecondaryIndexes"].([]any) {
			gm := g.(map[string]any)
			gsis[gm["IndexName"].(string)] = jsonOf(gm["KeySchema"]) + jsonOf(gm["Projection"])
		}
		for index, want := range map[string][]string{
			"owner":           {`"AttributeName":"lo","KeyType":"HASH"`, `"AttributeName":"lc","KeyType":"RANGE"`, `"NonKeyAttributes":["kind"],"ProjectionType":"INCLUDE"`},
			"owner_attention": {`"AttributeName":"ls","KeyType":"HASH"`, `"AttributeName":"lc","KeyType":"RANGE"`, `"NonKeyAttributes":["kind","status"],"ProjectionType":"INCLUDE"`},
		} {
			for _, w := range want {
				if !strings.Contains(gsis[index], w) {
					t.Errorf("%s: index %s %s lacks %s", name, index, gsis[index], w)
				}
			}
		}
		for _, fn := range []string{"getjob", "cancel"} {
			f := s.function(t, fn)
			if !strings.Contains(jsonOf(f["Environment"]), "JOBS_PAGE_TOKEN_SECRET") {
				t.Errorf("%s %s: no page token secret", name, fn)
			}
			role := f["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
			for _, pol := range s.resources("AWS::IAM::Policy") {
				p := props(pol)
				if !strings.Contains(jsonOf(p["Roles"]), role) {
					continue
				}
				for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					stmt := jsonOf(st)
					if strings.Contains(stmt, `"dynamodb:Query"`) && (!strings.Contains(stmt, "/index/owner") || strings.Contains(stmt, "/index/sweep")) {
						t.Errorf("%s %s may query %s", name, fn, stmt)
					}
					if strings.Contains(stmt, "secretsmanager:GetSecretValue") && (!strings.Contains(stmt, "PageTokenSecret") || strings.Contains(stmt, "PayloadSecret")) {
						t.Errorf("%s %s may read %s", name, fn, stmt)
					}
				}
			}
		}
	}
}
