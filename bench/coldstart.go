package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/localaws"
	"github.com/lambdajobs/lambdajobs/internal/localstack"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// coldResult is one bootstrap's size and first-invoke time.
type coldResult struct {
	Name      string
	SizeARM64 int64         // the deployable bootstrap (make build)
	First     time.Duration // first invoke under the emulator, this machine's arch
	Warm      time.Duration // the second invoke
}

// coldStart times the first invoke of each function (started fresh under
// the Runtime Interface Emulator) against a hello-world aws-lambda-go
// bootstrap built the same way.
func coldStart(ctx context.Context) ([]coldResult, error) {
	root, err := localaws.FindRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-cold-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	build := func(pkg, out, goarch, wd string) error {
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-tags", "lambda.norpc", "-ldflags=-s -w -buildid=", "-o", out, pkg)
		cmd.Dir = wd
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", pkg, err, b)
		}
		return nil
	}
	// An emulated table so the functions' first calls are real.
	ddb, err := localaws.StartDynamoDB(ctx, localaws.Options{})
	if err != nil {
		return nil, err
	}
	defer ddb.Stop()
	if _, err := localaws.DynamoDBClient(ddb.Endpoint).CreateTable(ctx, dynamostore.CreateTableInput("bench-cold")); err != nil {
		return nil, err
	}
	env := []string{"JOBS_TABLE=bench-cold", "JOBS_QUEUE_URL=http://127.0.0.1:1/000000000000/none",
		"AWS_ENDPOINT_URL_DYNAMODB=" + ddb.Endpoint, "AWS_ENDPOINT_URL_SQS=http://127.0.0.1:1",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_EC2_METADATA_DISABLED=true",
		"JOBS_PAYLOAD_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
		"JOBS_PAGE_TOKEN_KEY=" + strings.Repeat("k", 32),
		"JOBS_SCHEDULE_GROUP=bench", "JOBS_QUEUE_ARN=arn:aws:sqs:us-east-1:000000000000:none",
		"JOBS_SCHEDULER_ROLE_ARN=arn:aws:iam::000000000000:role/none", "JOBS_SCHEDULE_DLQ_ARN=arn:aws:sqs:us-east-1:000000000000:none-dlq"}
	events := map[string]string{
		"hello":     `{}`,
		"getjob":    `{"version":"2.0","rawPath":"/v1/jobs/x","pathParameters":{"id":"x"},"requestContext":{"authorizer":{"iam":{"userArn":"arn:aws:iam::000000000000:user/a"}},"http":{"method":"GET"}}}`,
		"enqueue":   `{"version":"2.0","rawPath":"/v1/jobs","headers":{"content-type":"text/plain"},"body":"x","requestContext":{"authorizer":{"iam":{"userArn":"arn:aws:iam::000000000000:user/a"}},"http":{"method":"POST"}}}`,
		"cancel":    `{"version":"2.0","rawPath":"/v1/jobs/x/cancel","pathParameters":{"id":"x"},"requestContext":{"authorizer":{"iam":{"userArn":"arn:aws:iam::000000000000:user/a"}},"http":{"method":"POST"}}}`,
		"worker":    `{"Records":[]}`,
		"sweeper":   `{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`,
		"schedules": `{"version":"2.0","rawPath":"/v1/schedules","requestContext":{"authorizer":{"iam":{"userArn":"arn:aws:iam::000000000000:user/a"}},"http":{"method":"GET"}}}`,
	}
	var out []coldResult
	for _, name := range []string{"hello", "enqueue", "getjob", "cancel", "worker", "sweeper", "schedules"} {
		pkg, wd := "./functions/"+name, root
		if name == "hello" {
			pkg, wd = "./hello", filepath.Join(root, "bench")
		}
		arm := filepath.Join(dir, "arm64", name, "bootstrap")
		host := filepath.Join(dir, "host", name, "bootstrap")
		if err := build(pkg, arm, "arm64", wd); err != nil {
			return nil, err
		}
		if err := build(pkg, host, goarch(), wd); err != nil {
			return nil, err
		}
		st, err := os.Stat(arm)
		if err != nil {
			return nil, err
		}
		r := coldResult{Name: name, SizeARM64: st.Size()}
		// The median of 5 fresh starts.
		var firsts, warms []time.Duration
		for range 5 {
			f, err := localstack.StartFunction(ctx, localstack.FunctionConfig{Name: name, RIE: filepath.Join(root, "bin", "aws-lambda-rie"), Bootstrap: host, Timeout: 30 * time.Second, Env: env})
			if err != nil {
				return nil, err
			}
			t := time.Now()
			_, err1 := f.Invoke(ctx, []byte(events[name]))
			first := time.Since(t)
			t = time.Now()
			_, err2 := f.Invoke(ctx, []byte(events[name]))
			warm := time.Since(t)
			f.Stop()
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: %v %v", name, err1, err2)
			}
			firsts, warms = append(firsts, first), append(warms, warm)
		}
		r.First, r.Warm = median(firsts), median(warms)
		out = append(out, r)
	}
	return out, nil
}
