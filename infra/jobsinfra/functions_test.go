package jobsinfra

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

func TestFunctionsRunTheBootstrapsOnArm(t *testing.T) {
	for name, s := range environments(t) {
		for _, fn := range FunctionNames {
			p := s.function(t, fn)
			arch := `["arm64"]`
			if s.cfg.Architecture == "x86_64" {
				arch = `["x86_64"]`
			}
			if p["Runtime"] != "provided.al2023" || jsonString(p["Architectures"]) != arch || p["Handler"] != "bootstrap" {
				t.Errorf("%s %s: runtime %v arch %v handler %v", name, fn, p["Runtime"], p["Architectures"], p["Handler"])
			}
			if lc, _ := p["LoggingConfig"].(map[string]any); lc == nil || lc["LogFormat"] != "JSON" {
				t.Errorf("%s %s: logging %v", name, fn, p["LoggingConfig"])
			}
			// No key material in any environment: only the functions that
			// seal or open payloads know where the key ring is, and read it
			// at cold start.
			env := jsonString(p["Environment"])
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
	for name, s := range environments(t) {
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
		// time its invocations cannot give (jobs.Config.WorkerTimeout).
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

func TestEventSourceReportsBatchItemFailures(t *testing.T) {
	for name, s := range environments(t) {
		maps := s.resources("AWS::Lambda::EventSourceMapping")
		if len(maps) != 1 {
			t.Fatalf("%s: %d event source mappings", name, len(maps))
		}
		for _, m := range maps {
			p := props(m)
			if jsonString(p["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` {
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

func TestSweeperScheduleWithoutRetries(t *testing.T) {
	for name, s := range environments(t) {
		found := false
		for _, r := range s.resources("AWS::Events::Rule") {
			p := props(r)
			if p["ScheduleExpression"] == "rate(1 minute)" {
				found = true
				if !strings.Contains(jsonString(p["Targets"]), `"MaximumRetryAttempts":0`) {
					t.Errorf("%s: schedule target retries: %s", name, jsonString(p["Targets"]))
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

// The worker's deliberate loop (retries and early deliveries sent back to
// its own trigger queue) is allowed; the sweeper runs one at a time; the
// queue's visibility covers two worker timeouts and the batching window
// (the dead-worker bound: sqsqueue.Spec).
func TestLoopsOverlapAndVisibility(t *testing.T) {
	for name, s := range environments(t) {
		if p := s.function(t, "worker"); p["RecursiveLoop"] != "Allow" {
			t.Errorf("%s: worker recursive loop %v, want Allow", name, p["RecursiveLoop"])
		}
		if p := s.function(t, "sweeper"); p["ReservedConcurrentExecutions"] != float64(1) {
			t.Errorf("%s: sweeper reserved concurrency %v, want 1", name, p["ReservedConcurrentExecutions"])
		}
		want := (2*s.cfg.WorkerTimeout + s.cfg.BatchWindow).Seconds()
		for _, q := range s.resources("AWS::SQS::Queue") {
			if v, ok := props(q)["VisibilityTimeout"]; ok && v != want {
				t.Errorf("%s: visibility %v, want %v", name, v, want)
			}
		}
	}
}

// The worker learns the sources connected to its queue, so that it refuses
// to start when its routes do not cover one of them.
func TestWorkerKnowsItsSources(t *testing.T) {
	for name, s := range environments(t) {
		var env string
		for _, f := range s.resources("AWS::Lambda::Function") {
			if strings.HasSuffix(fmt.Sprint(props(f)["Description"]), " worker") {
				env = jsonString(props(f)["Environment"])
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

// Every function knows its role, so one bootstrap (lambdafn.Serve) can
// serve all seven; with one bootstrap, one asset.
func TestEveryFunctionKnowsItsRole(t *testing.T) {
	for name, s := range environments(t) {
		roles := map[string]bool{}
		assets := map[string]bool{}
		for _, f := range s.resources("AWS::Lambda::Function") {
			p := props(f)
			desc := fmt.Sprint(p["Description"])
			if !strings.HasPrefix(desc, "lambdajobs ") {
				continue // a team's own function
			}
			role := desc[strings.LastIndexByte(desc, ' ')+1:]
			if !strings.Contains(jsonString(p["Environment"]), `"JOBS_FUNCTION":"`+role+`"`) {
				t.Errorf("%s: %s lacks JOBS_FUNCTION=%s", name, desc, role)
			}
			roles[role] = true
			assets[jsonString(p["Code"])] = true
		}
		if len(roles) != len(FunctionNames) {
			t.Errorf("%s: roles %v", name, roles)
		}
		if want := map[bool]int{true: 1, false: len(FunctionNames)}[name == "single"]; len(assets) != want {
			t.Errorf("%s: %d assets, want %d", name, len(assets), want)
		}
	}
}

// Every function setting of Config reaches the template.
func TestFunctionSettingsReachTheTemplate(t *testing.T) {
	s := environments(t)["tuned"]
	seen := 0
	for id, f := range s.resources("AWS::Lambda::Function") {
		if strings.HasPrefix(id, customResourceProvider) {
			continue // CDK's, which sets the DLQs' RedriveAllowPolicy (TestDeadLetterQueuesTakeOnlyTheirSources)
		}
		p := props(f)
		desc := fmt.Sprint(p["Description"])
		role := desc[strings.LastIndexByte(desc, ' ')+1:]
		env := jsonString(p["Environment"])
		wantMem, wantTimeout := float64(s.cfg.APIMemoryMB), s.cfg.APITimeout.Seconds()
		switch role {
		case "worker":
			wantMem, wantTimeout = float64(s.cfg.WorkerMemoryMB), s.cfg.WorkerTimeout.Seconds()
		case "sweeper":
			wantTimeout = s.cfg.SweeperTimeout.Seconds()
		case "waitjob":
			// Its timeout bounds the waits: the descriptor's, not tuned.
			f, _ := deploy.FunctionNamed(deploy.WaitJob)
			wantMem, wantTimeout = float64(f.MemoryMB), f.Timeout.Seconds()
			if p["ReservedConcurrentExecutions"] != float64(s.cfg.WaitConcurrency) {
				t.Errorf("%s: reserved concurrency %v, want %d", desc, p["ReservedConcurrentExecutions"], s.cfg.WaitConcurrency)
			}
		}
		if p["MemorySize"] != wantMem || p["Timeout"] != wantTimeout {
			t.Errorf("%s: memory %v timeout %v, want %v and %v", desc, p["MemorySize"], p["Timeout"], wantMem, wantTimeout)
		}
		if jsonString(p["Architectures"]) != `["x86_64"]` || !strings.Contains(env, `"TEAM_SETTING":"all"`) {
			t.Errorf("%s: architectures %v environment %s", desc, p["Architectures"], env)
		}
		if got := strings.Contains(env, "WORKER_ONLY"); got != (role == "worker") {
			t.Errorf("%s: WORKER_ONLY present %v", desc, got)
		}
		seen++
	}
	if seen != len(FunctionNames) {
		t.Fatalf("%d functions", seen)
	}
}

// Every function logs in JSON at the configured application level (INFO
// unless set), which aws-lambda-go's logger reads from AWS_LAMBDA_LOG_LEVEL.
func TestLogLevel(t *testing.T) {
	for name, s := range environments(t) {
		want := s.cfg.LogLevel
		if want == "" {
			want = "INFO"
		}
		for _, fn := range FunctionNames {
			lc := jsonString(s.function(t, fn)["LoggingConfig"])
			if !strings.Contains(lc, `"ApplicationLogLevel":"`+want+`"`) || !strings.Contains(lc, `"LogFormat":"JSON"`) {
				t.Errorf("%s %s: logging %s, want JSON at %s", name, fn, lc, want)
			}
		}
	}
}

// Tracing is off by default (it costs per trace) and active on every
// function when asked for, with the X-Ray write permissions and the
// functions' own spans switched on.
func TestTracing(t *testing.T) {
	for name, s := range environments(t) {
		for _, fn := range FunctionNames {
			mode := jsonString(s.function(t, fn)["TracingConfig"])
			if on := strings.Contains(mode, `"Active"`); on != s.cfg.Tracing {
				t.Errorf("%s %s: tracing %s, want on=%v", name, fn, mode, s.cfg.Tracing)
			}
			env := jsonString(s.function(t, fn)["Environment"])
			if on := strings.Contains(env, `"JOBS_TRACING":"on"`); on != s.cfg.Tracing {
				t.Errorf("%s %s: JOBS_TRACING in %s, want on=%v", name, fn, env, s.cfg.Tracing)
			}
		}
		if got := strings.Contains(jsonString(s.resources("AWS::IAM::Policy")), "xray:PutTraceSegments"); got != s.cfg.Tracing {
			t.Errorf("%s: X-Ray permissions %v, want %v", name, got, s.cfg.Tracing)
		}
	}
}

// Operators reach the admin routes: the functions behind them are told
// who the operators are; nobody is, unless configured.
func TestOperators(t *testing.T) {
	for name, s := range environments(t) {
		for _, fn := range []string{"getjob", "cancel"} {
			env := jsonString(s.function(t, fn)["Environment"])
			want := len(s.cfg.Operators) > 0
			if got := strings.Contains(env, `"JOBS_OPERATORS":"arn:aws:iam::123456789012:role/oncall,arn:aws:iam::123456789012:role/support"`); got != want {
				t.Errorf("%s %s: JOBS_OPERATORS present %v, want %v: %s", name, fn, got, want, env)
			}
		}
	}
}

// The enqueue function (POST /v1/jobs and replays) is told who may give a
// job's tenant and lane (nobody, unless configured) and each caller's
// enqueue rate (none, unless configured).
func TestTrustedCallers(t *testing.T) {
	for name, s := range environments(t) {
		env := jsonString(s.function(t, "enqueue")["Environment"])
		want := `"JOBS_TRUSTED_CALLERS":""`
		if len(s.cfg.TrustedCallers) > 0 {
			want = `"JOBS_TRUSTED_CALLERS":"arn:aws:iam::123456789012:role/billing"`
		}
		if !strings.Contains(env, want) {
			t.Errorf("%s enqueue: want %s in %s", name, want, env)
		}
		rate := fmt.Sprintf(`"JOBS_ENQUEUE_RATE_PER_OWNER":"%d"`, s.cfg.EnqueueRatePerOwner)
		if !strings.Contains(env, rate) {
			t.Errorf("%s enqueue: want %s in %s", name, rate, env)
		}
		// The wait function is told each caller's open waits: the
		// default unless configured.
		waits := `"JOBS_WAITS_PER_OWNER":"20"`
		if s.cfg.WaitsPerOwner != 0 {
			waits = fmt.Sprintf(`"JOBS_WAITS_PER_OWNER":"%d"`, s.cfg.WaitsPerOwner)
		}
		if env := jsonString(s.function(t, "waitjob")["Environment"]); !strings.Contains(env, waits) {
			t.Errorf("%s waitjob: want %s in %s", name, waits, env)
		}
	}
}

// JOBS_MESSAGE_FIRST is one value on every function that reads it (the
// seven functions' readers, every lane's worker, a function given
// GrantEnqueue): on unless Config.MessageFirst is false (the tuned stack),
// and told to no function that does not read it. A worker and an enqueue
// that disagreed would each meet jobs the other made under the other rule.
func TestMessageFirstIsOneValueOnEveryFunctionThatReadsIt(t *testing.T) {
	type function struct {
		id, name string
		env      map[string]any
	}
	check := func(stack string, fns []function, want string) {
		t.Helper()
		told := 0
		for _, f := range fns {
			reads := f.name == "" || deploy.EnvMessageFirst.ReadBy(f.name) // "": a function given GrantEnqueue
			got, ok := f.env[deploy.EnvMessageFirst.Name]
			switch {
			case reads && got != want:
				t.Errorf("%s: %s (%s) is told %s=%v, want %s", stack, f.id, f.name, deploy.EnvMessageFirst.Name, got, want)
			case !reads && ok:
				t.Errorf("%s: %s (%s) does not read %s but is told %v", stack, f.id, f.name, deploy.EnvMessageFirst.Name, got)
			}
			if ok {
				told++
			}
		}
		if told < 4 {
			t.Errorf("%s: %d functions told %s, want at least enqueue, cancel, worker and sweeper", stack, told, deploy.EnvMessageFirst.Name)
		}
	}
	// ours are the functions of the template that read the jobs table: the
	// construct's (JOBS_FUNCTION names each) and those given GrantEnqueue.
	ours := func(resources map[string]map[string]any) []function {
		var out []function
		for id, r := range resources {
			environment, _ := props(r)["Environment"].(map[string]any)
			vars, _ := environment["Variables"].(map[string]any)
			if _, ok := vars[deploy.EnvTable.Name]; ok {
				name, _ := vars[deploy.EnvFunction.Name].(string)
				out = append(out, function{id, name, vars})
			}
		}
		return out
	}
	granted := false
	for name, s := range environments(t) {
		want := "on"
		if s.cfg.MessageFirst != nil && !*s.cfg.MessageFirst {
			want = "off"
		}
		fns := ours(s.resources("AWS::Lambda::Function"))
		for _, f := range fns {
			granted = granted || f.name == ""
		}
		check(name, fns, want)
	}
	if !granted {
		t.Error("no environment has a function given GrantEnqueue: the test no longer sees one")
	}
	if tuned := environments(t)["tuned"]; tuned.cfg.MessageFirst == nil || *tuned.cfg.MessageFirst {
		t.Error("the tuned stack no longer turns message first off: the test sees no other value")
	}
	lanes := synthLanes(t)
	resources := map[string]map[string]any{}
	for id, r := range lanes.of("AWS::Lambda::Function") {
		resources[id] = map[string]any{"Properties": r.Properties}
	}
	fns := ours(resources)
	workers := 0
	for _, f := range fns {
		if f.name == deploy.Worker {
			workers++
		}
	}
	if workers != 4 {
		t.Errorf("lanes: %d workers, want one per lane (4)", workers)
	}
	check("lanes", fns, "on")
}
