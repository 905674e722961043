package jobsinfra

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// environment is one stack of the construct that the template tests read:
// its configuration, its template, and cdk-nag's AwsSolutions findings.
type environment struct {
	cfg       Config
	stack     awscdk.Stack
	jobs      *Jobs
	template  map[string]any
	nagErrors []string
	nagWarns  []string
}

var (
	environmentsOnce sync.Once
	environmentsAll  map[string]*environment
	environmentsErr  error
)

// environments are the construct's stacks every template test reads, each
// synthesized once (unpinned, as an environment-agnostic synth is) with
// cdk-nag's AwsSolutions pack: the dev and prod presets, and one per group
// of options: sources (with a team's function given GrantEnqueue and a
// role given GrantReadJobs), jwt (with CORS), tuned (every function and
// event-source setting away from its default) and single (one bootstrap
// for all seven functions). All but prod fire the example kinds' schedules.
func environments(t *testing.T) map[string]*environment {
	t.Helper()
	environmentsOnce.Do(func() { environmentsAll, environmentsErr = synthEnvironments(t) })
	if environmentsErr != nil {
		t.Fatal(environmentsErr)
	}
	return environmentsAll
}

func synthEnvironments(t *testing.T) (map[string]*environment, error) {
	dev := DevConfig("dev")
	prod := ProdConfig("prod")
	prod.AlarmEmail = "oncall@example.com"
	withSources := DevConfig("sources")
	withSources.S3Sources = []S3Source{{BucketName: "uploads-example", Prefix: "incoming/"}}
	withSources.EventBridgeSource = []EventBridgeSource{{Sources: []string{"shop.orders"}, DetailTypes: []string{"OrderPlaced"}}}
	withSources.EnvelopeSenders = []string{"arn:aws:iam::123456789012:role/nightly-batch"}
	withJWT := DevConfig("jwt")
	withJWT.JWT = &JWTConfig{Issuer: "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE", Audience: []string{"client"},
		Scopes: map[string][]string{"POST /v1/batches": {"jobs/batch"}, "POST /v1/jobs": {"jobs/write"}, "GET /v1/jobs/{id}": {"jobs/read"}}}
	withJWT.CORS = &CORSConfig{AllowOrigins: []string{"https://app.example.com"}}
	single := DevConfig("single")
	out := map[string]*environment{}
	for _, cfg := range []Config{dev, prod, withSources, withJWT, tunedConfig(), single} {
		e, err := synthEnvironment(t, cfg)
		if err != nil {
			return nil, fmt.Errorf("synth %s: %w", cfg.Name, err)
		}
		out[cfg.Name] = e
	}
	return out, nil
}

// tunedConfig has every event-source-mapping setting away from its default,
// and every function setting.
func tunedConfig() Config {
	tuned := DevConfig("tuned")
	tuned.BatchSize, tuned.BatchWindow, tuned.MaxConcurrency = 100, 20*time.Second, 7
	tuned.WorkerMemoryMB, tuned.APIMemoryMB, tuned.APITimeout, tuned.SweeperTimeout = 2048, 384, 20*time.Second, 90*time.Second
	tuned.Architecture = "x86_64"
	tuned.Tracing = true
	tuned.LogLevel = "WARN"
	tuned.Operators = []string{"arn:aws:iam::123456789012:role/oncall", "arn:aws:iam::123456789012:role/support"}
	tuned.TrustedCallers = []string{"arn:aws:iam::123456789012:role/billing"}
	tuned.EnqueueRatePerOwner = 200
	tuned.WaitConcurrency, tuned.WaitsPerOwner = 30, 5
	tuned.KeyAdmins = []string{"arn:aws:iam::123456789012:role/security"}
	tuned.CustomerManagedKey = true
	tuned.Environment = map[string]string{"TEAM_SETTING": "all"}
	tuned.FunctionEnvironment = map[string]map[string]string{"worker": {"WORKER_ONLY": "1"}}
	tuned.MessageFirst = jsii.Bool(false)
	one := 1
	tuned.TagIndexes = &one // a stack from before tags, on its first of three deploys
	return tuned
}

// exampleSchedules are the example kinds' periodic jobs (example.tick).
func exampleSchedules() ([]jobs.Schedule, error) {
	reg := jobs.NewRegistry()
	if _, err := examplekinds.Register(reg); err != nil {
		return nil, err
	}
	return reg.Schedules(), nil
}

func synthEnvironment(t *testing.T, cfg Config) (e *environment, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(t), Outdir: jsii.String(t.TempDir())})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	stack := awscdk.NewStack(app, jsii.String("lambdajobs-"+cfg.Name), nil)
	props := &JobsProps{Config: cfg, Bootstraps: fakeBootstraps(t)}
	if cfg.Name != "prod" {
		if props.Schedules, err = exampleSchedules(); err != nil {
			return nil, err
		}
	}
	switch cfg.Name {
	case "tuned":
		// A team's own schedule: a cron in a time zone.
		props.Schedules = append(props.Schedules, jobs.Schedule{Name: "nightly-report", Expression: "cron(0 2 * * ? *)",
			TimeZone: "Europe/Paris", Kind: "report", Payload: []byte(`{}`), Overlap: jobs.OverlapSkip})
	case "single":
		// One bootstrap serving every function (lambdafn.Serve).
		props.Bootstraps, props.Bootstrap = "", oneBootstrap(t)
	}
	j := NewJobs(stack, "Jobs", props)
	if cfg.Name == "sources" {
		teamGrants(stack, j)
	}
	e = &environment{cfg: cfg, stack: stack, jobs: j, template: *assertions.Template_FromStack(stack, nil).ToJSON()}
	e.nagErrors = nagFindings(stack, "aws:cdk:error")
	e.nagWarns = nagFindings(stack, "aws:cdk:warning")
	return e, nil
}

// teamGrants adds a team's own function that enqueues directly
// (transactional enqueue) and an operator's role that reads jobs straight
// from the table.
func teamGrants(stack awscdk.Stack, j *Jobs) {
	orders := awslambda.NewFunction(stack, jsii.String("Orders"), &awslambda.FunctionProps{
		Runtime: awslambda.Runtime_PROVIDED_AL2023(), Architecture: awslambda.Architecture_ARM_64(),
		Handler: jsii.String("bootstrap"), Code: awslambda.Code_FromAsset(jsii.String(j.asset("enqueue")), nil),
		Description: jsii.String("orders service"),
	})
	j.GrantEnqueue(orders)
	reader := awsiam.NewRole(stack, jsii.String("Reader"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewAccountRootPrincipal(), Description: jsii.String("job reader"),
	})
	j.GrantReadJobs(reader)
	cdknag.NagSuppressions_AddResourceSuppressions(orders, &[]*cdknag.NagPackSuppression{
		{Id: jsii.String("AwsSolutions-IAM4"), Reason: jsii.String("a test stand-in for a team's own function")},
	}, jsii.Bool(true))
}

// Every environment passes cdk-nag's AwsSolutions pack: what it flags is
// fixed or suppressed with its reason (with this CDK an unsuppressed error
// also fails the synthesis itself).
func TestNagAwsSolutionsHasNoUnsuppressedErrors(t *testing.T) {
	for name, s := range environments(t) {
		if len(s.nagErrors) > 0 {
			t.Errorf("%s: %d cdk-nag errors:\n%s", name, len(s.nagErrors), strings.Join(s.nagErrors, "\n"))
		}
		for _, w := range s.nagWarns {
			t.Logf("%s: warning %s", name, w)
		}
	}
}

// nagFindings are cdk-nag's AwsSolutions annotations of one level
// ("aws:cdk:error", "aws:cdk:warning") in a synthesized stack, read from
// the construct tree's metadata.
func nagFindings(stack awscdk.Stack, level string) []string {
	var out []string
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		for _, m := range *c.Node().Metadata() {
			if data, ok := m.Data.(string); ok && *m.Type == level && strings.HasPrefix(data, "AwsSolutions-") {
				out = append(out, *c.Node().Path()+": "+data)
			}
		}
	}
	return out
}

var (
	oneBootstrapOnce sync.Once
	oneBootstrapDir  string
)

// oneBootstrap is a folder holding one bootstrap stand-in for every
// function (JobsProps.Bootstrap).
func oneBootstrap(t *testing.T) string {
	t.Helper()
	oneBootstrapOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jobsinfra-bootstrap-")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte("one main"), 0o755); err != nil {
			t.Fatal(err)
		}
		oneBootstrapDir = dir
	})
	return oneBootstrapDir
}

// resources returns the template's resources of a type, by logical id.
func (e *environment) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range e.template["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

// id is a construct's logical id in the environment's template.
func (e *environment) id(c constructs.IConstruct) string {
	if el, ok := c.(awscdk.CfnElement); ok {
		return *e.stack.GetLogicalId(el)
	}
	return *e.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// function finds one of the construct's functions by its description.
func (e *environment) function(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, f := range e.resources("AWS::Lambda::Function") {
		if props(f)["Description"] == "lambdajobs "+e.cfg.Name+" "+name {
			return props(f)
		}
	}
	t.Fatalf("%s: no %s function", e.cfg.Name, name)
	return nil
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}
