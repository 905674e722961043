package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// coldResult is one bootstrap's size and first-invoke times (medians over
// the fresh starts).
type coldResult struct {
	Name string // the function (hello: the baseline)
	// Traced: built as `make build` builds this repository's functions,
	// with OpenTelemetry and the S3 client linked (internal/withtracing:
	// tracing.XRay(); internal/withobjects: s3objects.Tier). Objects
	// without Traced: the S3 client alone (the tag lambdajobs.notracing),
	// as a team's main that passes Objects and no lambdafn.Opts.Tracing.
	// Neither: with the tags lambdajobs.notracing and
	// lambdajobs.noobjects, as a team's main that passes neither.
	Traced, Objects bool
	SizeARM64       int64    // the deployable bootstrap (make build)
	OTel            []string // OpenTelemetry modules `go version -m` lists in it
	First           time.Duration
	// Init is the emulator's INIT REPORT: from the process's start to the
	// runtime's first request for work (Go runtime, package
	// initialisation, lambdafn's set-up). Invoke is the first invocation
	// alone (INVOKE RTDONE): for the sweeper, its first sweep.
	Init, Invoke time.Duration
	Warm         time.Duration // the second invoke
	// Inits is the packages' initialisation (GODEBUG=inittrace=1, summed),
	// and Steps lambdafn's set-up breakdown (its DEBUG line "function set
	// up"), in milliseconds.
	Inits float64
	Steps map[string]float64
}

// coldNames are the functions measured: hello world first.
var coldNames = []string{"hello", "enqueue", "getjob", "waitjob", "cancel", "worker", "sweeper", "schedules"}

// coldTarget is one bootstrap measured: a function, with or without the
// S3 tier and tracing linked (coldResult.Traced, Objects).
type coldTarget struct {
	name            string
	traced, objects bool
}

func (t coldTarget) key() string {
	switch {
	case t.traced:
		return t.name + "+tracing"
	case t.objects:
		return t.name + "+objects"
	}
	return t.name
}

// coldTargets are hello world, the functions with neither linked, with
// the S3 tier, then with both (make build's).
func coldTargets() []coldTarget {
	var out []coldTarget
	for _, v := range []coldTarget{{}, {objects: true}, {traced: true, objects: true}} {
		for _, name := range coldNames {
			if name != "hello" || !v.objects {
				out = append(out, coldTarget{name, v.traced, v.objects})
			}
		}
	}
	return out
}

// coldStart times the first invoke of each function (started fresh under
// the Runtime Interface Emulator, runs times) against a hello-world
// aws-lambda-go bootstrap built the same way. The functions take turns, one
// fresh start each per round, so that the machine's load falls on all of
// them alike; then as many starts again with the set-up breakdown turned on
// (it prints, so it is not timed with the rest).
func coldStart(ctx context.Context, runs int) ([]coldResult, error) {
	root, err := localaws.FindRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-cold-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	build := func(pkg, out, goarch, wd, tags string) error {
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-tags", tags, "-ldflags=-s -w -buildid=", "-o", out, pkg)
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
	env := []string{deploy.EnvTable.Name + "=bench-cold", deploy.EnvQueueURL.Name + "=http://127.0.0.1:1/000000000000/none",
		"AWS_ENDPOINT_URL_DYNAMODB=" + ddb.Endpoint, "AWS_ENDPOINT_URL_SQS=http://127.0.0.1:1",
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_SESSION_TOKEN=local", "AWS_EC2_METADATA_DISABLED=true",
		deploy.EnvPayloadKey.Name + "=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
		deploy.EnvPageTokenKey.Name + "=" + strings.Repeat("k", 32),
		deploy.EnvScheduleGroup.Name + "=bench", deploy.EnvQueueARN.Name + "=arn:aws:sqs:us-east-1:000000000000:none",
		deploy.EnvSchedulerRoleARN.Name + "=arn:aws:iam::000000000000:role/none", deploy.EnvScheduleDLQARN.Name + "=arn:aws:sqs:us-east-1:000000000000:none-dlq"}
	// Lambda's environment holds no AWS_ variable but its own (and the
	// construct lets no team set one): blank those this machine has (a CA
	// bundle, a profile), which the emulator would pass on.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") && !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			env = append(env, k+"=")
		}
	}
	events := map[string]string{
		"hello":   `{}`,
		"worker":  `{"Records":[]}`,
		"sweeper": `{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`,
	}
	for name, call := range map[string]struct {
		route   string
		headers map[string]string
		body    string
	}{
		"getjob": {route: deploy.RouteGetJob}, "waitjob": {route: deploy.RouteWaitJob}, "cancel": {route: deploy.RouteCancelJob}, "schedules": {route: deploy.RouteListSchedules},
		"enqueue": {route: deploy.RouteEnqueue, headers: map[string]string{"content-type": "text/plain"}, body: "x"},
	} {
		ev, err := apiEvent(call.route, call.headers, call.body)
		if err != nil {
			return nil, err
		}
		events[name] = ev
	}
	results := map[string]*coldResult{}
	host := map[string]string{}
	targets := coldTargets()
	for _, tg := range targets {
		name := tg.name
		pkg, wd := "./functions/"+name, root
		if name == "hello" {
			pkg, wd = "./hello", filepath.Join(root, "bench")
		}
		tags := "lambda.norpc"
		if !tg.traced {
			tags += ",lambdajobs.notracing"
		}
		if !tg.objects {
			tags += ",lambdajobs.noobjects"
		}
		arm := filepath.Join(dir, "arm64", tg.key(), "bootstrap")
		host[tg.key()] = filepath.Join(dir, "host", tg.key(), "bootstrap")
		if err := build(pkg, arm, "arm64", wd, tags); err != nil {
			return nil, err
		}
		if err := build(pkg, host[tg.key()], goarch(), wd, tags); err != nil {
			return nil, err
		}
		st, err := os.Stat(arm)
		if err != nil {
			return nil, err
		}
		otel, err := otelModules(arm)
		if err != nil {
			return nil, err
		}
		results[tg.key()] = &coldResult{Name: name, Traced: tg.traced, Objects: tg.objects, SizeARM64: st.Size(), OTel: otel, Steps: map[string]float64{}}
	}
	start := func(tg coldTarget) (*localstack.Function, *lockedBuffer, error) {
		out := &lockedBuffer{}
		f, err := localstack.StartFunction(ctx, localstack.FunctionConfig{Name: tg.name, RIE: filepath.Join(root, "bin", "aws-lambda-rie"),
			Bootstrap: host[tg.key()], Timeout: 30 * time.Second, Env: env, Output: out})
		return f, out, err
	}
	// One start each first, untimed: the emulator's table and the page
	// cache warm up before anything is measured.
	for _, tg := range targets {
		f, _, err := start(tg)
		if err != nil {
			return nil, err
		}
		_, err = f.Invoke(ctx, []byte(events[tg.name]))
		f.Stop()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tg.key(), err)
		}
	}
	type samples struct{ first, init, invoke, warm []time.Duration }
	timed := map[string]*samples{}
	for range runs {
		for _, tg := range targets {
			name := tg.key()
			f, out, err := start(tg)
			if err != nil {
				return nil, err
			}
			t := time.Now()
			_, err1 := f.Invoke(ctx, []byte(events[tg.name]))
			first := time.Since(t)
			t = time.Now()
			_, err2 := f.Invoke(ctx, []byte(events[tg.name]))
			warm := time.Since(t)
			f.Stop()
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: %v %v", name, err1, err2)
			}
			init, invoke, err := emulatorTimes(out.String())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			s := timed[name]
			if s == nil {
				s = &samples{}
				timed[name] = s
			}
			s.first, s.init, s.invoke, s.warm = append(s.first, first), append(s.init, init), append(s.invoke, invoke), append(s.warm, warm)
		}
	}
	// The set-up breakdown, from as many starts again, outside the
	// emulator (whose piping of the bootstrap's output would slow what
	// inittrace prints): the bootstrap initialises, sets up, logs its
	// breakdown and exits when it finds no Runtime API to ask for work.
	inits := map[string][]float64{}
	steps := map[string]map[string][]float64{}
	for range runs {
		for _, tg := range targets {
			name := tg.key()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			cmd := exec.CommandContext(cctx, host[name])
			cmd.Env = append(slices.Clone(env), "GODEBUG=inittrace=1", "AWS_LAMBDA_LOG_LEVEL=DEBUG", "AWS_LAMBDA_LOG_FORMAT=JSON",
				"AWS_LAMBDA_FUNCTION_NAME="+tg.name, "PATH="+os.Getenv("PATH"))
			out, _ := cmd.CombinedOutput() // it exits 1: no Runtime API
			cancel()
			total, setup, err := breakdown(string(out), tg.name != "hello")
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			inits[name] = append(inits[name], total)
			if steps[name] == nil {
				steps[name] = map[string][]float64{}
			}
			for k, v := range setup {
				steps[name][k] = append(steps[name][k], v)
			}
		}
	}
	var out []coldResult
	for _, tg := range targets {
		name := tg.key()
		r, s := results[name], timed[name]
		r.First, r.Init, r.Invoke, r.Warm = median(s.first), median(s.init), median(s.invoke), median(s.warm)
		r.Inits = medianF(inits[name])
		for k, v := range steps[name] {
			r.Steps[k] = medianF(v)
		}
		out = append(out, *r)
	}
	return out, nil
}

var (
	initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	invokeDone = regexp.MustCompile(`INVOKE RTDONE\(status: [a-z]+, produced bytes: [0-9]+, duration: ([0-9.]+)ms\)`)
	initLine   = regexp.MustCompile(`(?m)^init \S+ @[0-9.]+ ms, ([0-9.]+) ms clock`)
)

// emulatorTimes reads the init and the first invocation's durations from
// the emulator's output.
func emulatorTimes(out string) (init, invoke time.Duration, err error) {
	i, v := initReport.FindStringSubmatch(out), invokeDone.FindStringSubmatch(out)
	if i == nil || v == nil {
		return 0, 0, fmt.Errorf("no INIT REPORT or INVOKE RTDONE in the emulator's output:\n%s", out)
	}
	ims, _ := strconv.ParseFloat(i[1], 64)
	vms, _ := strconv.ParseFloat(v[1], 64)
	return time.Duration(ims * float64(time.Millisecond)), time.Duration(vms * float64(time.Millisecond)), nil
}

// breakdown reads the packages' initialisation time (inittrace, summed)
// and lambdafn's set-up line from a bootstrap's output.
func breakdown(out string, wantSetup bool) (inits float64, setup map[string]float64, err error) {
	for _, m := range initLine.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		inits += v
	}
	setup = map[string]float64{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"function set up"`) {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			return 0, nil, err
		}
		for k, v := range fields {
			if f, ok := v.(float64); ok && strings.HasSuffix(k, "_ms") {
				setup[strings.TrimSuffix(k, "_ms")] = f
			}
		}
	}
	if wantSetup && len(setup) == 0 {
		return 0, nil, fmt.Errorf("no set-up line in the output:\n%s", out)
	}
	return inits, setup, nil
}

// otelModules lists the OpenTelemetry modules linked into a binary.
func otelModules(bin string) ([]string, error) {
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("go version -m %s: %w", bin, err)
	}
	var mods []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "dep" && strings.HasPrefix(f[1], "go.opentelemetry.io/") {
			mods = append(mods, f[1])
		}
	}
	return mods, nil
}

// lockedBuffer is a buffer the emulator's stdout and stderr share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func medianF(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2]
}

// apiEvent is API Gateway's event (payload format 2.0) of a call of the
// route named id, with {id} "x", as caller a: the fields a cold start
// reads, at the route table's method and path.
func apiEvent(id string, headers map[string]string, body string) (string, error) {
	rt, ok := deploy.RouteByID(id)
	if !ok {
		return "", fmt.Errorf("no route %q", id)
	}
	params := map[string]string{}
	if strings.Contains(rt.Path, "{id}") {
		params["id"] = "x"
	}
	path, err := rt.PathFor(params)
	if err != nil {
		return "", err
	}
	ev := map[string]any{"version": "2.0", "rawPath": path, "requestContext": map[string]any{
		"authorizer": map[string]any{"iam": map[string]any{"userArn": "arn:aws:iam::000000000000:user/a"}},
		"http":       map[string]any{"method": rt.Method},
	}}
	if len(params) > 0 {
		ev["pathParameters"] = params
	}
	if headers != nil {
		ev["headers"], ev["body"] = headers, body
	}
	raw, err := json.Marshal(ev)
	return string(raw), err
}
