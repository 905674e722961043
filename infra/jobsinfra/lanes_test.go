package jobsinfra

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// laneStack is one stack with the three preset lanes and an unused lane in
// Config.Lanes: urgent with provisioned pollers, long on managed
// instances for 90 minutes.
type laneStack struct {
	cfg   Config
	stack awscdk.Stack
	jobs  *Jobs
	t     *cfnTemplate
	nag   []string
}

var (
	laneStackOnce sync.Once
	laneStackOf   *laneStack
)

func lanesConfig() Config {
	cfg := DevConfig("lanes")
	cfg.Lanes = map[string]LaneConfig{
		LaneUrgent: {ProvisionedPollers: 2},
		LaneLong: {WorkerTimeout: 90 * time.Minute, WorkerMemoryMB: 2048, ManagedInstances: &ManagedInstances{
			SubnetIDs: []string{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"}, SecurityGroupIDs: []string{"sg-0123456789abcdef0"},
			MaxVCPUs: 64, PerInstanceConcurrency: 4,
		}},
		"unused": {BatchSize: 3},
	}
	return cfg
}

func synthLanes(t *testing.T) *laneStack {
	t.Helper()
	laneStackOnce.Do(func() {
		cfg := lanesConfig()
		app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(t), Outdir: jsii.String(t.TempDir())})
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
		stack := awscdk.NewStack(app, jsii.String("test-lanes"), &awscdk.StackProps{
			Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)},
		})
		j := NewJobs(stack, "Jobs", &JobsProps{Config: cfg, Bootstraps: fakeBootstraps(t), Lanes: []string{"urgent", "bulk", "long", "bulk"}})
		raw := *assertions.Template_FromStack(stack, nil).ToJSON()
		tmpl, err := newTemplate(raw, testAccount, testRegion)
		if err != nil {
			t.Fatal(err)
		}
		laneStackOf = &laneStack{cfg: cfg, stack: stack, jobs: j, t: tmpl, nag: nagFindings(stack, "aws:cdk:error")}
	})
	if laneStackOf == nil {
		t.Fatal("the lanes stack did not synthesize")
	}
	return laneStackOf
}

func (s *laneStack) of(typ string) map[string]cfnResource {
	out := map[string]cfnResource{}
	for id, r := range s.t.resources {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

func (s *laneStack) logicalID(lane, what string) string {
	l := s.jobs.Lanes[lane]
	var el awscdk.CfnElement
	switch what {
	case "queue":
		el = l.Queue.Node().DefaultChild().(awscdk.CfnElement)
	case "dlq":
		el = l.DLQ.Node().DefaultChild().(awscdk.CfnElement)
	case "worker":
		el = l.Worker.Node().DefaultChild().(awscdk.CfnElement)
	case "role":
		el = l.Worker.Role().Node().DefaultChild().(awscdk.CfnElement)
	}
	return *s.stack.GetLogicalId(el)
}

// Each lane the registry uses is its own queue, dead-letter queue, worker
// (the worker's code, JOBS_LANE, its own timeout) and event source (its
// batch size, window and maximum concurrency); a lane only Config names
// creates nothing. The queue's visibility and the worker's handler
// reserve and final write follow the lane's timeout.
func TestEachLaneIsItsOwnQueueWorkerAndEventSource(t *testing.T) {
	s := synthLanes(t)
	if got := strings.Join(s.jobs.laneOrder, ","); got != ",bulk,long,urgent" {
		t.Fatalf("lanes %q, want the default lane, then bulk, long, urgent", got)
	}
	if _, ok := s.jobs.Lanes["unused"]; ok {
		t.Error("a lane only Config names was created")
	}
	esms := s.of("AWS::Lambda::EventSourceMapping")
	if len(esms) != 4 {
		t.Fatalf("%d event source mappings, want one per lane (4)", len(esms))
	}
	byQueue := map[string]map[string]any{}
	for _, m := range esms {
		arn, err := s.t.resolveString(m.Properties["EventSourceArn"])
		if err != nil {
			t.Fatal(err)
		}
		byQueue[arn] = m.Properties
	}
	for _, c := range []struct {
		lane                   string
		batch, window, maxConc float64
		timeout                time.Duration
		pollers                float64
		// The handler reserve and final write's bound: DevConfig's 3 s
		// and 2 s, the final write given 1/180 of a long timeout.
		reserve, finalWrite string
	}{
		{"", 10, 0, 5, 60 * time.Second, 0, "3s", "2s"},
		{"urgent", 1, 0, 0, 60 * time.Second, 2, "3s", "2s"}, // provisioned: no maximum concurrency
		{"bulk", 100, 2, 2, 60 * time.Second, 0, "3s", "2s"},
		{"long", 1, 0, 5, 90 * time.Minute, 0, "31s", "30s"},
	} {
		q := s.t.resources[s.logicalID(c.lane, "queue")].Properties
		qarn, err := s.t.getAtt(s.logicalID(c.lane, "queue"), "Arn")
		if err != nil {
			t.Fatal(err)
		}
		m := byQueue[qarn]
		if m == nil {
			t.Errorf("lane %q: no event source on its queue", c.lane)
			continue
		}
		fnRef, _ := s.t.resolveString(m["FunctionName"])
		if want, _ := s.t.ref(s.logicalID(c.lane, "worker")); fnRef != want {
			t.Errorf("lane %q: its queue feeds %s, want its own worker %s", c.lane, fnRef, want)
		}
		window, _ := m["MaximumBatchingWindowInSeconds"].(float64)
		scaling, _ := m["ScalingConfig"].(map[string]any)
		maxConc, _ := scaling["MaximumConcurrency"].(float64)
		if m["BatchSize"] != c.batch || window != c.window || maxConc != c.maxConc ||
			jsonString(m["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` {
			t.Errorf("lane %q: batch %v window %v scaling %v responses %v, want %v %v %v", c.lane, m["BatchSize"], window, m["ScalingConfig"], m["FunctionResponseTypes"], c.batch, c.window, c.maxConc)
		}
		pp, _ := m["ProvisionedPollerConfig"].(map[string]any)
		if min, _ := pp["MinimumPollers"].(float64); min != c.pollers {
			t.Errorf("lane %q: provisioned pollers %v, want minimum %v", c.lane, pp, c.pollers)
		}
		// Visibility: two of the lane's timeouts and its window.
		if want := (2*c.timeout + time.Duration(c.window)*time.Second).Seconds(); q["VisibilityTimeout"] != want {
			t.Errorf("lane %q: visibility %v, want %v", c.lane, q["VisibilityTimeout"], want)
		}
		redrive := jsonString(q["RedrivePolicy"])
		if !strings.Contains(redrive, s.logicalID(c.lane, "dlq")) {
			t.Errorf("lane %q: redrive %s, want its own dead-letter queue %s", c.lane, redrive, s.logicalID(c.lane, "dlq"))
		}
		fn := s.t.resources[s.logicalID(c.lane, "worker")].Properties
		vars := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
		if vars["JOBS_FUNCTION"] != "worker" || fn["Timeout"] != c.timeout.Seconds() || fn["RecursiveLoop"] != "Allow" {
			t.Errorf("lane %q: worker function %v timeout %v loop %v", c.lane, vars["JOBS_FUNCTION"], fn["Timeout"], fn["RecursiveLoop"])
		}
		if got, _ := vars["JOBS_LANE"].(string); got != c.lane {
			t.Errorf("lane %q: worker's JOBS_LANE %q", c.lane, got)
		}
		if got, _ := vars["JOBS_WORKER_TIMEOUT"].(string); got == "" || parseDur(t, got) != c.timeout.Seconds() {
			t.Errorf("lane %q: worker's JOBS_WORKER_TIMEOUT %q, want %v", c.lane, got, c.timeout)
		}
		if vars["JOBS_HANDLER_RESERVE"] != c.reserve || vars["JOBS_FINAL_WRITE_TIMEOUT"] != c.finalWrite {
			t.Errorf("lane %q: worker's reserve %v and final write %v, want %s and %s", c.lane, vars["JOBS_HANDLER_RESERVE"], vars["JOBS_FINAL_WRITE_TIMEOUT"], c.reserve, c.finalWrite)
		}
		_, sources := vars["JOBS_SOURCES"]
		if sources && c.lane != "" {
			t.Errorf("lane %q: a lane's worker is told the sources (they reach the default lane's queue)", c.lane)
		}
	}
}

// Every function that sends knows every lane's queue and its grace, and
// may send to each (its role in each queue policy's known senders); the
// Scheduler sends fires to the default lane's queue only, and the
// functions that do not send know nothing of the lanes.
func TestEverySenderMaySendToEveryLane(t *testing.T) {
	s := synthLanes(t)
	lanes := []string{"", "bulk", "long", "urgent"}
	senders := map[string]string{"enqueue": "", "cancel": "", "sweeper": ""}
	for _, l := range lanes {
		senders["worker-"+l] = l
	}
	for name := range senders {
		var fnID, roleID string
		if l, ok := strings.CutPrefix(name, "worker-"); ok {
			fnID, roleID = s.logicalID(l, "worker"), s.logicalID(l, "role")
		} else {
			f := s.jobs.Functions[name]
			fnID = *s.stack.GetLogicalId(f.Node().DefaultChild().(awscdk.CfnElement))
			roleID = *s.stack.GetLogicalId(f.Role().Node().DefaultChild().(awscdk.CfnElement))
		}
		vars := s.t.resources[fnID].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
		urls := jsonString(vars["JOBS_LANE_QUEUE_URLS"])
		for _, l := range lanes[1:] {
			if !strings.Contains(urls, l) || !strings.Contains(urls, s.logicalID(l, "queue")) {
				t.Errorf("%s: JOBS_LANE_QUEUE_URLS %s lacks lane %s", name, urls, l)
			}
		}
		graces := map[string]string{}
		if err := json.Unmarshal([]byte(vars["JOBS_LANE_DISPATCH_GRACES"].(string)), &graces); err != nil {
			t.Fatalf("%s: JOBS_LANE_DISPATCH_GRACES: %v", name, err)
		}
		// The long lane's grace covers its 90-minute runs by the default
		// lane's margin (3m grace over a 60s timeout).
		if graces["long"] != (92*time.Minute).String() || graces["urgent"] != (3*time.Minute).String() {
			t.Errorf("%s: graces %v, want long 1h32m, urgent 3m", name, graces)
		}
		policies, err := s.t.identityPolicies(roleID)
		if err != nil {
			t.Fatal(err)
		}
		sends := jsonString(policies)
		for _, l := range lanes {
			if !strings.Contains(sends, "sqs:SendMessage") || !strings.Contains(sends, s.logicalID(l, "queue")) {
				t.Errorf("%s: may not send to lane %q's queue: %s", name, l, sends)
			}
		}
		for _, l := range lanes {
			pol, err := s.t.resourcePolicy(s.logicalID(l, "queue"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(jsonString(pol), roleID) {
				t.Errorf("lane %q's queue policy does not know %s as a sender", l, name)
			}
		}
	}
	for _, name := range []string{"getjob", "schedules"} {
		f := s.jobs.Functions[name]
		env := jsonString(s.t.resources[*s.stack.GetLogicalId(f.Node().DefaultChild().(awscdk.CfnElement))].Properties["Environment"])
		if strings.Contains(env, "JOBS_LANE") {
			t.Errorf("%s, which never sends, is told of the lanes: %s", name, env)
		}
	}
	scheduler, err := s.t.identityPolicies(*s.stack.GetLogicalId(s.jobs.SchedulerRole.Node().DefaultChild().(awscdk.CfnElement)))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lanes[1:] {
		if strings.Contains(jsonString(scheduler), s.logicalID(l, "queue")) {
			t.Errorf("the Scheduler's role may send to lane %s's queue; fires go to the default lane's", l)
		}
	}
}

// Each lane has its dead-letter alarm, its oldest-message alarm, whose
// threshold grows with the lane's timeout, and its near-expiry alarm; each other lane's worker has
// its errors and throttles alarms; the dashboard shows each lane's depth.
func TestEachLaneHasAlarmsAndADashboardLine(t *testing.T) {
	s := synthLanes(t)
	alarms := map[string]map[string]any{}
	for id, a := range s.of("AWS::CloudWatch::Alarm") {
		alarms[id] = a.Properties
	}
	find := func(prefix string) map[string]any {
		for id, a := range alarms {
			if strings.HasPrefix(id, "Jobs"+prefix) {
				return a
			}
		}
		return nil
	}
	for _, c := range []struct {
		lane   string
		oldest time.Duration
	}{{"", 15 * time.Minute}, {"urgent", 15 * time.Minute}, {"bulk", 15 * time.Minute}, {"long", 15*time.Minute + 89*time.Minute}} {
		id := laneID(c.lane)
		dlq := find(id + "DeadLettersAlarm")
		if dlq == nil || !strings.Contains(jsonString(dlq), s.logicalID(c.lane, "dlq")) {
			t.Errorf("lane %q: no dead-letter alarm on its DLQ", c.lane)
		}
		old := find(id + "OldestMessageAlarm")
		if old == nil || old["Threshold"] != c.oldest.Seconds() || !strings.Contains(jsonString(old), s.logicalID(c.lane, "queue")) {
			t.Errorf("lane %q: oldest-message alarm %v, want %v on its queue", c.lane, old["Threshold"], c.oldest.Seconds())
		}
		// Every lane's messages are kept 14 days: its alarm fires at 10.
		expiry := find(id + "MessagesNearExpiryAlarm")
		if expiry == nil || expiry["Threshold"] != float64(10*24*3600) || expiry["MetricName"] != "ApproximateAgeOfOldestMessage" ||
			!strings.Contains(jsonString(expiry), s.logicalID(c.lane, "queue")) {
			t.Errorf("lane %q: near-expiry alarm %v, want 10 days on its queue", c.lane, expiry)
		}
		if c.lane == "" {
			continue
		}
		for _, what := range []string{"WorkerErrorsAlarm", "WorkerThrottlesAlarm"} {
			if a := find(id + what); a == nil || !strings.Contains(jsonString(a), s.logicalID(c.lane, "worker")) {
				t.Errorf("lane %q: no %s on its worker", c.lane, what)
			}
		}
	}
	var body string
	for _, d := range s.of("AWS::CloudWatch::Dashboard") {
		body = jsonString(d.Properties["DashboardBody"])
	}
	for _, l := range []string{"default", "urgent", "bulk", "long"} {
		if !strings.Contains(body, l+" depth") || !strings.Contains(body, l+" dead letters") {
			t.Errorf("the dashboard does not show lane %s's depth and dead letters", l)
		}
	}
}

// The long lane on Lambda Managed Instances: a capacity provider in the
// given subnets and security groups, the lane's worker on it with a
// 90-minute timeout and its per-environment concurrency; cdk-nag stays
// clean with it and the other lanes.
func TestLongLaneOnManagedInstances(t *testing.T) {
	s := synthLanes(t)
	cps := s.of("AWS::Lambda::CapacityProvider")
	if len(cps) != 1 {
		t.Fatalf("%d capacity providers, want 1", len(cps))
	}
	for _, cp := range cps {
		p := jsonString(cp.Properties)
		for _, want := range []string{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1", "sg-0123456789abcdef0", `"MaxVCpuCount":64`} {
			if !strings.Contains(p, want) {
				t.Errorf("capacity provider lacks %s: %s", want, p)
			}
		}
	}
	fn := s.t.resources[s.logicalID("long", "worker")].Properties
	if fn["Timeout"] != (90 * time.Minute).Seconds() {
		t.Errorf("long worker timeout %v, want 5400", fn["Timeout"])
	}
	cfg := jsonString(fn["CapacityProviderConfig"])
	if !strings.Contains(cfg, "LambdaManagedInstancesCapacityProviderConfig") || !strings.Contains(cfg, `"PerExecutionEnvironmentMaxConcurrency":4`) {
		t.Errorf("long worker capacity provider config %s", cfg)
	}
	for _, l := range []string{"", "urgent", "bulk"} {
		if _, on := s.t.resources[s.logicalID(l, "worker")].Properties["CapacityProviderConfig"]; on {
			t.Errorf("lane %q's worker runs on the capacity provider", l)
		}
	}
	if len(s.nag) > 0 {
		t.Errorf("%d cdk-nag errors:\n%s", len(s.nag), strings.Join(s.nag, "\n"))
	}
}

// Config refuses lanes it cannot deploy.
func TestConfigRefusesLanes(t *testing.T) {
	for name, lanes := range map[string]map[string]LaneConfig{
		"the default lane by name":             {"default": {}},
		"an empty name":                        {"": {}},
		"16 minutes without managed instances": {"long": {WorkerTimeout: 16 * time.Minute}},
		"91 minutes on managed instances": {"long": {WorkerTimeout: 91 * time.Minute,
			ManagedInstances: &ManagedInstances{SubnetIDs: []string{"subnet-1"}, SecurityGroupIDs: []string{"sg-1"}}}},
		"managed instances without a VPC": {"long": {ManagedInstances: &ManagedInstances{}}},
		"a batch over 10 with no window":  {"urgent": {BatchSize: 20}},
		"too many provisioned pollers":    {"urgent": {ProvisionedPollers: 201}},
	} {
		cfg := DevConfig("lanes")
		cfg.Lanes = lanes
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := lanesConfig().Validate(); err != nil {
		t.Errorf("the lanes test config: %v", err)
	}
}
