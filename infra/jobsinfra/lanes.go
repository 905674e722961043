package jobsinfra

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// The lane presets: a lane the registry uses takes the preset of its name
// (LanePreset), which Config.Lanes may change.
const (
	// LaneUrgent takes one job per invocation, with no batching window, so
	// an urgent job starts as soon as a poller sees it, whatever waits in
	// the other lanes.
	LaneUrgent = "urgent"
	// LaneBulk takes large batches after a batching window, with a capped
	// maximum concurrency, so a backlog of bulk work neither crowds the
	// account's concurrency nor delays another lane.
	LaneBulk = "bulk"
	// LaneLong has a worker of its own with Lambda's longest timeout (15
	// minutes), one job per invocation; with ManagedInstances, up to 90
	// minutes.
	LaneLong = "long"
)

// LaneConfig is one lane's worker and event source. A zero field takes
// the lane's preset (LanePreset).
type LaneConfig struct {
	// WorkerTimeout is the lane's worker's Lambda timeout: at most 15
	// minutes, or 90 with ManagedInstances. The lane's queue visibility
	// (six timeouts and the batching window), its dispatch grace and its
	// oldest-message alarm follow it.
	WorkerTimeout  time.Duration
	WorkerMemoryMB int
	// BatchSize, BatchWindow and MaxConcurrency configure the lane's event
	// source mapping (as Config's do the default lane's).
	BatchSize      int
	BatchWindow    time.Duration
	MaxConcurrency int
	// ProvisionedPollers, when positive, puts the lane's event source in
	// provisioned mode with at least this many pollers (1-200), always
	// polling: the lane's first job starts without waiting for Lambda to
	// scale its pollers up. Billed per event poller unit-hour; see
	// docs/guide/LANES.md.
	ProvisionedPollers int
	// ManagedInstances, when set, runs the lane's worker on Lambda Managed
	// Instances, whose queue-fed invocations may run up to 90 minutes.
	ManagedInstances *ManagedInstances
}

// ManagedInstances is a Lambda Managed Instances capacity provider for a
// lane's worker: EC2 instances that Lambda manages in your VPC, each
// running several invocations in one process at once.
type ManagedInstances struct {
	// SubnetIDs and SecurityGroupIDs place the instances in your VPC
	// (the subnets need a route to DynamoDB, SQS and Secrets Manager).
	SubnetIDs, SecurityGroupIDs []string
	// MaxVCPUs bounds the provider's instances (0: Lambda's default).
	MaxVCPUs int
	// PerInstanceConcurrency is how many invocations one execution
	// environment runs at once (0: Lambda's default).
	PerInstanceConcurrency int
}

// maxManagedTimeout is the longest timeout of a queue-fed function on
// Lambda Managed Instances.
const maxManagedTimeout = 90 * time.Minute

// LanePreset is the settings of the lane name under cfg: the default lane
// ("") has Config's own; urgent, bulk and long their presets (see
// LaneUrgent, LaneBulk, LaneLong); any other lane the default lane's.
func LanePreset(cfg Config, name string) LaneConfig {
	l := LaneConfig{WorkerTimeout: cfg.WorkerTimeout, WorkerMemoryMB: cfg.WorkerMemoryMB,
		BatchSize: cfg.BatchSize, BatchWindow: cfg.BatchWindow, MaxConcurrency: cfg.MaxConcurrency}
	switch name {
	case LaneUrgent:
		l.BatchSize, l.BatchWindow = 1, 0
	case LaneBulk:
		l.BatchSize, l.BatchWindow = 100, 2*time.Second
		l.MaxConcurrency = max(2, cfg.MaxConcurrency/5)
	case LaneLong:
		l.WorkerTimeout, l.BatchSize, l.BatchWindow = 15*time.Minute, 1, 0
	}
	return l
}

// lane is the settings of the lane name: its preset, then what
// Config.Lanes changes.
func (c Config) lane(name string) LaneConfig {
	l := LanePreset(c, name)
	if name == "" {
		return l
	}
	o := c.Lanes[name]
	if o.WorkerTimeout != 0 {
		l.WorkerTimeout = o.WorkerTimeout
	}
	if o.WorkerMemoryMB != 0 {
		l.WorkerMemoryMB = o.WorkerMemoryMB
	}
	if o.BatchSize != 0 {
		l.BatchSize, l.BatchWindow = o.BatchSize, o.BatchWindow
	}
	if o.MaxConcurrency != 0 {
		l.MaxConcurrency = o.MaxConcurrency
	}
	l.ProvisionedPollers, l.ManagedInstances = o.ProvisionedPollers, o.ManagedInstances
	return l
}

// dispatchGrace is the lane's dispatch grace: Config's, or more for a lane
// whose worker runs longer than the default lane's, by the same margin
// over its timeout and batching window.
func (c Config) dispatchGrace(l LaneConfig) time.Duration {
	return deploy.LaneDispatchGrace(c.DispatchGrace, c.WorkerTimeout, l.WorkerTimeout, l.BatchWindow)
}

// deadlines are the handler reserve and final-write bound of the lane's
// worker: Config's, grown for a long timeout (jobs.Deadlines.ForTimeout:
// a final write that settles a long run is given 1/180 of the timeout,
// 30 s for 90 minutes, and the reserve as much more).
func (c Config) deadlines(l LaneConfig) jobs.Deadlines {
	return jobs.Deadlines{Reserve: c.HandlerReserve, FinalWrite: c.FinalWriteTimeout}.ForTimeout(l.WorkerTimeout)
}

// validateLanes checks Config.Lanes.
func (c Config) validateLanes() error {
	for _, name := range slices.Sorted(maps.Keys(c.Lanes)) {
		if name == "" || !driver.ValidLane(name) {
			return fmt.Errorf("%s: lane %q: want a lower-case letter, then up to 15 lower-case letters, digits or '-', not \"default\" (the default lane is tuned by Config's own fields)", c.Name, name)
		}
		l := c.lane(name)
		longest := 15 * time.Minute
		if l.ManagedInstances != nil {
			longest = maxManagedTimeout
			if len(l.ManagedInstances.SubnetIDs) == 0 || len(l.ManagedInstances.SecurityGroupIDs) == 0 {
				return fmt.Errorf("%s: lane %s: managed instances need SubnetIDs and SecurityGroupIDs", c.Name, name)
			}
		}
		queue := sqsqueue.SpecFor(l.WorkerTimeout, l.BatchWindow).Validate(l.WorkerTimeout)
		switch {
		case l.WorkerTimeout <= 2*c.deadlines(l).Reserve || l.WorkerTimeout > longest:
			return fmt.Errorf("%s: lane %s: worker timeout %v: more than twice the reserve %v, at most %v", c.Name, name, l.WorkerTimeout, c.deadlines(l).Reserve, longest)
		case queue != nil:
			return fmt.Errorf("%s: lane %s: the queue: %w", c.Name, name, queue)
		case l.BatchSize < 1 || l.BatchSize > 10000 || (l.BatchSize > 10 && l.BatchWindow == 0):
			return fmt.Errorf("%s: lane %s: batch size %d: 1..10, or up to 10000 with a batching window", c.Name, name, l.BatchSize)
		case l.BatchWindow > 5*time.Minute:
			return fmt.Errorf("%s: lane %s: batching window %v: at most 5 minutes", c.Name, name, l.BatchWindow)
		case l.MaxConcurrency < 2 || l.MaxConcurrency > 1000:
			return fmt.Errorf("%s: lane %s: maximum concurrency %d: 2..1000", c.Name, name, l.MaxConcurrency)
		case l.ProvisionedPollers < 0 || l.ProvisionedPollers > 200:
			return fmt.Errorf("%s: lane %s: provisioned pollers %d: 0 (none) to 200", c.Name, name, l.ProvisionedPollers)
		}
	}
	return nil
}

// Lane is one lane's resources: its queue pair, its worker and its
// settings. The default lane ("") is Jobs.Queue, Jobs.DLQ and Jobs.Worker.
type Lane struct {
	Name       string
	Queue, DLQ awssqs.Queue
	Worker     awslambda.Function
	// CapacityProvider runs the worker on Lambda Managed Instances
	// (LaneConfig.ManagedInstances); nil otherwise.
	CapacityProvider awslambda.CapacityProvider
	Config           LaneConfig
}

// laneNames are the lanes the construct creates: the default lane, then
// those of JobsProps.Lanes (Registry.Lanes), sorted, each once.
func laneNames(lanes []string) []string {
	out := []string{""}
	for _, l := range lanes {
		if !driver.ValidLane(l) {
			panic(fmt.Sprintf("jobsinfra: lane %q: want a lower-case letter, then up to 15 lower-case letters, digits or '-', not \"default\"", l))
		}
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.Sort(out[1:])
	return out
}

// laneID is the part of a lane's construct ids that names it ("" for the
// default lane, whose ids predate lanes).
func laneID(name string) string {
	if name == "" {
		return ""
	}
	return "Lane" + strings.ToUpper(name[:1]) + strings.ReplaceAll(name[1:], "-", "")
}

// laneQueues creates each other lane's queue pair, as the default lane's.
func (s *Jobs) laneQueues() {
	for _, name := range s.laneOrder[1:] {
		l := s.cfg.lane(name)
		spec := sqsqueue.SpecFor(l.WorkerTimeout, l.BatchWindow)
		dlq := s.queue(laneID(name)+"DeadLetters", "dead-letters-"+name, &awssqs.QueueProps{RetentionPeriod: dur(spec.DLQRetention)}, nil)
		q := s.queue(laneID(name)+"Queue", "jobs-"+name, &awssqs.QueueProps{RetentionPeriod: dur(spec.Retention)}, func(props *awssqs.QueueProps) {
			props.VisibilityTimeout = dur(spec.VisibilityTimeout)
			props.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: dlq, MaxReceiveCount: jsii.Number(float64(spec.MaxReceiveCount))}
		})
		s.Lanes[name] = &Lane{Name: name, Queue: q, DLQ: dlq, Config: l}
	}
}

// laneValues sets in v what the functions are told of the other lanes,
// when there are: their queues and dispatch graces (every function that
// sends), and their dead-letter queues (the operators' dead-letter routes).
func (s *Jobs) laneValues(v deploy.Values[*string]) {
	if len(s.laneOrder) == 1 {
		return
	}
	urls, dlqs := map[string]*string{}, map[string]*string{}
	graces := map[string]time.Duration{}
	for _, name := range s.laneOrder[1:] {
		urls[name], dlqs[name] = s.Lanes[name].Queue.QueueUrl(), s.Lanes[name].DLQ.QueueUrl()
		graces[name] = s.cfg.dispatchGrace(s.Lanes[name].Config)
	}
	stack := awscdk.Stack_Of(s.Construct)
	v[deploy.EnvLaneQueueURLs.Var] = stack.ToJsonString(urls, nil)
	v[deploy.EnvLaneDLQURLs.Var] = stack.ToJsonString(dlqs, nil)
	v[deploy.EnvLaneDispatchGraces.Var] = jsii.String(deploy.EnvLaneDispatchGraces.Format(graces))
}

// laneWorkerValues are what the worker of the lane name is told: the
// functions' values (s.values), with its lane, its timeout and its
// deadlines (grown for a long timeout), and without the sources, whose
// messages reach the default lane's queue.
func (s *Jobs) laneWorkerValues(name string) deploy.Values[*string] {
	l := s.Lanes[name].Config
	d := s.cfg.deadlines(l)
	v := maps.Clone(s.values)
	delete(v, deploy.EnvSources.Var)
	v[deploy.EnvLane.Var] = jsii.String(name)
	v[deploy.EnvWorkerTimeout.Var] = jsii.String(deploy.EnvWorkerTimeout.Format(l.WorkerTimeout))
	v[deploy.EnvHandlerReserve.Var] = jsii.String(deploy.EnvHandlerReserve.Format(d.Reserve))
	v[deploy.EnvFinalWriteTimeout.Var] = jsii.String(deploy.EnvFinalWriteTimeout.Format(d.FinalWrite))
	return v
}

// laneWorkers creates each other lane's worker: the worker's code and
// role's actions, its own timeout and memory (and what it is told:
// laneWorkerValues), and its own event source (triggers).
func (s *Jobs) laneWorkers() {
	for _, name := range s.laneOrder[1:] {
		lane := s.Lanes[name]
		l := lane.Config
		timeout := l.WorkerTimeout
		fn := s.function(deploy.Worker, deploy.Worker+"-"+name, l.WorkerMemoryMB, min(timeout, 15*time.Minute))
		if timeout > 15*time.Minute {
			// CDK's Function refuses more than 15 minutes; Lambda accepts
			// up to 90 on managed instances.
			fn.Node().DefaultChild().(awslambda.CfnFunction).AddPropertyOverride(jsii.String("Timeout"), jsii.Number(timeout.Seconds()))
		}
		lane.Worker = fn
		if m := l.ManagedInstances; m != nil {
			lane.CapacityProvider = s.capacityProvider(name, m)
		}
	}
}

// capacityProvider creates the managed instances of the lane name's worker
// and runs the worker on them.
func (s *Jobs) capacityProvider(name string, m *ManagedInstances) awslambda.CapacityProvider {
	id := laneID(name)
	var subnets []awsec2.ISubnet
	for i, sn := range m.SubnetIDs {
		subnet := awsec2.Subnet_FromSubnetId(s.Construct, jsii.String(fmt.Sprintf("%sSubnet%d", id, i)), jsii.String(sn))
		// Only the subnet's id is passed on (to the capacity provider).
		awscdk.Annotations_Of(subnet).AcknowledgeWarning(jsii.String("@aws-cdk/aws-ec2:noSubnetRouteTableId"), jsii.String("only the subnet id is used"))
		subnets = append(subnets, subnet)
	}
	var groups []awsec2.ISecurityGroup
	for i, sg := range m.SecurityGroupIDs {
		groups = append(groups, awsec2.SecurityGroup_FromSecurityGroupId(s.Construct, jsii.String(fmt.Sprintf("%sSecurityGroup%d", id, i)), jsii.String(sg), nil))
	}
	props := &awslambda.CapacityProviderProps{Subnets: &subnets, SecurityGroups: &groups}
	if m.MaxVCPUs > 0 {
		props.MaxVCpuCount = jsii.Number(float64(m.MaxVCPUs))
	}
	cp := awslambda.NewCapacityProvider(s.Construct, jsii.String(id+"CapacityProvider"), props)
	cdknag.NagSuppressions_AddResourceSuppressions(cp, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM4"),
		Reason: jsii.String("The capacity provider's operator role, which Lambda assumes to launch and manage the instances, " +
			"takes AWS's AWSLambdaManagedEC2ResourceOperator policy: it tracks what Lambda Managed Instances need, and no function's role gets it."),
		AppliesTo: &[]interface{}{jsii.String("Policy::arn:<AWS::Partition>:iam::aws:policy/AWSLambdaManagedEC2ResourceOperator")},
	}}, jsii.Bool(true))
	opts := &awslambda.CapacityProviderFunctionOptions{}
	if m.PerInstanceConcurrency > 0 {
		opts.PerExecutionEnvironmentMaxConcurrency = jsii.Number(float64(m.PerInstanceConcurrency))
	}
	cp.AddFunction(s.Lanes[name].Worker, opts)
	return cp
}

// laneTrigger connects a lane's worker to its queue, with the lane's
// batch size, batching window, maximum concurrency and pollers.
func (s *Jobs) laneTrigger(lane *Lane) {
	l := lane.Config
	props := &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(float64(l.BatchSize)),
		MaxBatchingWindow:       batchWindow(l.BatchWindow),
		MaxConcurrency:          jsii.Number(float64(l.MaxConcurrency)),
		ReportBatchItemFailures: jsii.Bool(true),
	}
	if l.ProvisionedPollers > 0 {
		// Lambda takes one or the other: the pollers' maximum then
		// bounds the lane (each poller invokes one batch at a time).
		props.MaxConcurrency = nil
		props.ProvisionedPollerConfig = &awslambda.ProvisionedPollerConfig{
			MinimumPollers: jsii.Number(float64(l.ProvisionedPollers)),
			MaximumPollers: jsii.Number(float64(max(l.ProvisionedPollers, l.MaxConcurrency))),
		}
	}
	lane.Worker.AddEventSource(awslambdaeventsources.NewSqsEventSource(lane.Queue, props))
}

// queueARNs are every lane's queue ARN, the default lane's first.
func (s *Jobs) queueARNs() *[]*string {
	var arns []*string
	for _, name := range s.laneOrder {
		arns = append(arns, s.Lanes[name].Queue.QueueArn())
	}
	return &arns
}

// workers are every lane's worker, the default lane's first.
func (s *Jobs) workers() []awslambda.Function {
	var out []awslambda.Function
	for _, name := range s.laneOrder {
		out = append(out, s.Lanes[name].Worker)
	}
	return out
}
