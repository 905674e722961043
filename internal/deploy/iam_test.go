package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
)

// Each role's grants are well formed: IAM actions with no wildcard, each
// on a resource the descriptor defines, each saying why; the key used only
// through the service that holds the data (but CDK's event source grant,
// which the key policy bounds); no triple twice.
func TestGrantsAreWellFormed(t *testing.T) {
	action := regexp.MustCompile(`^[a-z][a-z0-9-]*:[A-Z][A-Za-z]*$`)
	known := []Resource{Table, Queues, DefaultQueue, OwnQueue, DLQs, ScheduleDLQ, Bus, RuntimeSchedules, SchedulerRole,
		PayloadSecret, PageSecret, Key, OwnLogs, Anything, SweepIndex, OwnerIndex, AttentionIndex, QueuedIndex, RunningIndex,
		WaitingIndex, KindQueuedIndex, TagIndex1, TagIndex2, TagIndex3, Parts, Uploads, Bucket}
	for _, role := range append(FunctionNames(), Scheduler, Reader) {
		grants := Grants(role)
		if len(grants) == 0 {
			t.Errorf("%s: no grants", role)
		}
		seen := map[Triple]bool{}
		for _, g := range grants {
			if g.Why == "" {
				t.Errorf("%s: a grant on %s says not why", role, g.Resource)
			}
			if !slices.Contains(known, g.Resource) {
				t.Errorf("%s: resource %q is not the descriptor's", role, g.Resource)
			}
			if g.Resource == Key && g.Condition.Via == "" && g.By != ByEventSource {
				t.Errorf("%s: uses the key %v with no kms:ViaService", role, g.Actions)
			}
			if g.Resource == Anything && g.By == "" {
				t.Errorf("%s: %v on every resource", role, g.Actions)
			}
			for _, a := range g.Actions {
				if !action.MatchString(a) {
					t.Errorf("%s: action %q: want service:Action, no wildcard", role, a)
				}
			}
		}
		for _, tr := range Triples(role) {
			if seen[tr] {
				t.Errorf("%s: %v twice", role, tr)
			}
			seen[tr] = true
		}
	}
	if got := Grants("nobody"); got != nil {
		t.Errorf("Grants(nobody) = %v, want nil", got)
	}
}

// What a function is told and what it may reach agree: it reads the
// variable naming a resource exactly when its grants reach that resource.
func TestGrantsAndEnvironmentAgree(t *testing.T) {
	for _, c := range []struct {
		variable string
		action   string
		resource Resource
	}{
		{"JOBS_QUEUE_URL", "sqs:SendMessage", Queues},
		{"JOBS_DLQ_URL", "sqs:ReceiveMessage", DLQs},
		{"JOBS_PAYLOAD_KEYRING_SECRET", "secretsmanager:GetSecretValue", PayloadSecret},
		{"JOBS_PAGE_TOKEN_SECRET", "secretsmanager:GetSecretValue", PageSecret},
		{"JOBS_EVENT_BUS", "events:PutEvents", Bus},
		{"JOBS_SCHEDULER_ROLE_ARN", "iam:PassRole", SchedulerRole},
		{"JOBS_SCHEDULE_GROUP", "scheduler:CreateSchedule", RuntimeSchedules},
	} {
		v, ok := Lookup(c.variable)
		if !ok {
			t.Fatalf("no variable %s", c.variable)
		}
		for _, fn := range FunctionNames() {
			granted := slices.ContainsFunc(Triples(fn), func(tr Triple) bool { return tr.Action == c.action && tr.Resource == c.resource })
			if granted != v.ReadBy(fn) {
				t.Errorf("%s: reads %s: %v; granted %s on %s: %v", fn, c.variable, v.ReadBy(fn), c.action, c.resource, granted)
			}
		}
	}
}

// Every AWS call recorded in make test's end-to-end and reliability runs
// (internal/dev/iamcalls) is among the descriptor's triples for the role that
// made it: a call the descriptor does not grant would be a call the
// construct does not allow. Skipped only when there is no recording and CI
// is unset; under CI a missing recording fails.
func TestEveryRecordedCallIsAmongItsRolesGrants(t *testing.T) {
	dir := os.Getenv(iamcalls.RecordDirEnv)
	if dir == "" {
		dir = filepath.Join("..", "..", "build", "iam-calls")
	}
	calls, err := iamcalls.Load(dir)
	if err != nil || len(calls) == 0 {
		msg := "no AWS calls recorded in " + dir + " (make test records them; " + iamcalls.RecordDirEnv + " names another folder)"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: %v", msg, err)
		}
		t.Skipf("%s: %v", msg, err)
	}
	// A lane's worker signs as iamcalls.LaneWorker(lane); its lane is
	// named by the queues it calls.
	lanes := map[string]string{}
	for _, c := range calls {
		for _, prefix := range []string{"queue/", "dlq/"} {
			if lane, ok := strings.CutPrefix(c.Resource, prefix); ok {
				lanes[iamcalls.LaneWorker(lane)] = lane
			}
		}
	}
	seen := map[string]int{}
	for _, c := range calls {
		role, lane := c.Principal, ""
		switch {
		case c.Principal == iamcalls.Enqueuer:
			role = Enqueue // GrantEnqueue gives the enqueue function's grants
		case lanes[c.Principal] != "":
			role, lane = Worker, lanes[c.Principal]
		case c.Principal == iamcalls.Caller || c.Principal == iamcalls.Operator:
			if !routeAllowed(c) {
				t.Errorf("%s %s %s: no such route for %s", c.Principal, c.Action, c.Resource, c.Principal)
			}
			seen[c.Principal]++
			continue
		}
		grants := Grants(role)
		if grants == nil {
			t.Errorf("%s %s %s: the descriptor has no role %q", c.Principal, c.Action, c.Resource, role)
			continue
		}
		seen[role]++
		if !slices.ContainsFunc(grants, func(g Grant) bool { return g.Allows(lane, c.Action, c.Resource, c.Context) }) {
			t.Errorf("%s (role %s, lane %q) called %s on %s %v: not among its grants in internal/deploy", c.Principal, role, lane, c.Action, c.Resource, c.Context)
		}
	}
	// The recording covers every role, so the check cannot pass hollowly.
	for _, role := range append(FunctionNames(), Scheduler, iamcalls.Caller, iamcalls.Operator) {
		if seen[role] == 0 {
			t.Errorf("no call of %s was recorded", role)
		}
	}
	if !t.Failed() {
		t.Logf("%d recorded calls, each among its role's grants", len(calls))
	}
}

// routeAllowed reports whether a caller's or an operator's recorded
// execute-api call is to one of the routes it may call.
func routeAllowed(c iamcalls.Call) bool {
	key, ok := strings.CutPrefix(c.Resource, "route/")
	if c.Action != "execute-api:Invoke" || !ok {
		return false
	}
	return slices.ContainsFunc(Routes, func(r Route) bool {
		return r.Key() == key && (r.Auth == AuthCaller || r.Auth == AuthOperator && c.Principal == iamcalls.Operator)
	})
}

func TestGrantAllows(t *testing.T) {
	send := Grant{Actions: []string{"sqs:SendMessage"}, Resource: Queues}
	own := Grant{Actions: []string{"sqs:ReceiveMessage"}, Resource: OwnQueue}
	pass := Grant{Actions: []string{"iam:PassRole"}, Resource: SchedulerRole, Condition: Condition{PassedTo: "scheduler.amazonaws.com"}}
	key := Grant{Actions: []string{"kms:Decrypt"}, Resource: Key, Condition: Condition{Via: "sqs"}}
	for _, c := range []struct {
		name     string
		g        Grant
		lane     string
		action   string
		resource string
		context  map[string]string
		want     bool
	}{
		{"every lane's queue: the default", send, "", "sqs:SendMessage", "queue", nil, true},
		{"every lane's queue: another", send, "", "sqs:SendMessage", "queue/bulk", nil, true},
		{"not a DLQ", send, "", "sqs:SendMessage", "dlq", nil, false},
		{"not another action", send, "", "sqs:ReceiveMessage", "queue", nil, false},
		{"own queue: the default lane's", own, "", "sqs:ReceiveMessage", "queue", nil, true},
		{"own queue: not another lane's", own, "", "sqs:ReceiveMessage", "queue/bulk", nil, false},
		{"own queue: a lane's", own, "bulk", "sqs:ReceiveMessage", "queue/bulk", nil, true},
		{"own queue: not the default from a lane", own, "bulk", "sqs:ReceiveMessage", "queue", nil, false},
		{"passed to its service", pass, "", "iam:PassRole", "role/scheduler", map[string]string{"iam:PassedToService": "scheduler.amazonaws.com"}, true},
		{"passed to another service", pass, "", "iam:PassRole", "role/scheduler", map[string]string{"iam:PassedToService": "lambda.amazonaws.com"}, false},
		{"passed without the key", pass, "", "iam:PassRole", "role/scheduler", nil, false},
		{"the key through its service", key, "", "kms:Decrypt", "key", map[string]string{"kms:ViaService": "sqs.us-east-1.amazonaws.com"}, true},
		{"the key directly", key, "", "kms:Decrypt", "key", nil, false},
		{"the key through another service", key, "", "kms:Decrypt", "key", map[string]string{"kms:ViaService": "dynamodb.us-east-1.amazonaws.com"}, false},
	} {
		if got := c.g.Allows(c.lane, c.action, c.resource, c.context); got != c.want {
			t.Errorf("%s: Allows = %v, want %v", c.name, got, c.want)
		}
	}
}
