package jobsinfra

import (
	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// An override of a resource's props reaches the template (a dev table
// with point-in-time recovery and the infrequent-access class, a queue's
// retention, the worker's memory and a variable of the team's, a log
// group's retention, an API without its default endpoint), while what the
// construct re-asserts holds whatever the override says (the key schema,
// the visibility timeout and redrive, the timeout and the construct's
// variables, the default stage).
func TestOverridesReachTheTemplate(t *testing.T) {
	var called []string
	overrides := &Overrides{
		Table: func(p *awsdynamodb.TableProps) {
			called = append(called, "table")
			p.PointInTimeRecoverySpecification = &awsdynamodb.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: jsii.Bool(true)}
			p.TableClass = awsdynamodb.TableClass_STANDARD_INFREQUENT_ACCESS
			p.PartitionKey = &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_NUMBER}
		},
		Queue: func(name string, p *awssqs.QueueProps) {
			called = append(called, "queue "+name)
			if name == "jobs" {
				p.RetentionPeriod = awscdk.Duration_Days(jsii.Number(2))
				p.VisibilityTimeout = awscdk.Duration_Seconds(jsii.Number(30))
				p.DeadLetterQueue = nil
			}
		},
		Function: func(name string, p *awslambda.FunctionProps) {
			called = append(called, "function "+name)
			if name == "worker" {
				p.MemorySize = jsii.Number(3008)
				p.Timeout = awscdk.Duration_Seconds(jsii.Number(900))
				(*p.Environment)["TEAM_FLAG"] = jsii.String("1")
				(*p.Environment)["JOBS_TABLE"] = jsii.String("someone-elses")
			}
		},
		LogGroup: func(name string, p *awslogs.LogGroupProps) {
			called = append(called, "log group "+name)
			if name == "worker" {
				p.Retention = awslogs.RetentionDays_ONE_YEAR
			}
		},
		API: func(p *awsapigatewayv2.HttpApiProps) {
			called = append(called, "api")
			p.DisableExecuteApiEndpoint = jsii.Bool(true)
			p.CreateDefaultStage = jsii.Bool(true)
		},
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(t), Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("overrides"), nil)
	j := NewJobs(stack, "Jobs", &JobsProps{Config: DevConfig("dev"), Bootstraps: fakeBootstraps(t), Overrides: overrides})
	e := &environment{cfg: DevConfig("dev"), stack: stack, jobs: j, template: template(t, stack)}

	// 1 table, 3 queues, the functions and their log groups, the access
	// logs, the API.
	if n := len(deploy.Functions); len(called) != 1+3+n+n+1+1 {
		t.Errorf("the hooks were called for %v", called)
	}
	table := props(e.resources("AWS::DynamoDB::Table")[e.id(j.Table)])
	if jsonString(table["PointInTimeRecoverySpecification"]) != `{"PointInTimeRecoveryEnabled":true}` || table["TableClass"] != "STANDARD_INFREQUENT_ACCESS" {
		t.Errorf("table overrides lost: %s", jsonString(table))
	}
	if jsonString(table["KeySchema"]) != `[{"AttributeName":"id","KeyType":"HASH"}]` {
		t.Errorf("the key schema was overridden: %s", jsonString(table["KeySchema"]))
	}
	queue := props(e.resources("AWS::SQS::Queue")[e.id(j.Queue)])
	if queue["MessageRetentionPeriod"] != float64(2*24*3600) {
		t.Errorf("queue retention %v, want 2 days", queue["MessageRetentionPeriod"])
	}
	if queue["VisibilityTimeout"] != 2*DevConfig("dev").WorkerTimeout.Seconds() || queue["RedrivePolicy"] == nil {
		t.Errorf("the queue's visibility and redrive were overridden: %s", jsonString(queue))
	}
	worker := e.function(t, "worker")
	vars := worker["Environment"].(map[string]any)["Variables"].(map[string]any)
	if worker["MemorySize"] != float64(3008) || vars["TEAM_FLAG"] != "1" {
		t.Errorf("worker overrides lost: memory %v, environment %s", worker["MemorySize"], jsonString(vars))
	}
	if worker["Timeout"] != DevConfig("dev").WorkerTimeout.Seconds() || jsonString(vars["JOBS_TABLE"]) != `{"Ref":"`+e.id(j.Table)+`"}` {
		t.Errorf("the worker's timeout or JOBS_TABLE was overridden: %v, %s", worker["Timeout"], jsonString(vars["JOBS_TABLE"]))
	}
	if e.function(t, "enqueue")["MemorySize"] != float64(DevConfig("dev").APIMemoryMB) {
		t.Errorf("an override of the worker reached enqueue")
	}
	logs := props(e.resources("AWS::Logs::LogGroup")[e.id(j.Worker.LogGroup())])
	if logs["RetentionInDays"] != float64(365) {
		t.Errorf("worker log retention %v, want 365", logs["RetentionInDays"])
	}
	for _, api := range e.resources("AWS::ApiGatewayV2::Api") {
		if props(api)["DisableExecuteApiEndpoint"] != true || props(api)["Name"] != j.Names.API {
			t.Errorf("API %s", jsonString(props(api)))
		}
	}
	if stages := e.resources("AWS::ApiGatewayV2::Stage"); len(stages) != 1 {
		t.Errorf("%d stages, want the construct's one", len(stages))
	}
}
