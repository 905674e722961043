package jobsinfra

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// customResourceProvider begins the logical ids of the Lambda function CDK
// shares across a stack's AwsCustomResources (and of its role): the one
// that sets the DLQs' RedriveAllowPolicy.
const customResourceProvider = "AWS679f53fac002430cb0da5b7982bd2287"

// Each lane's DLQ may be the dead-letter queue of its own lane's queue
// only, the schedules' DLQ of none; no one may send to a lane's DLQ, and
// only Scheduler's role to the schedules'.
func TestDeadLetterQueuesTakeOnlyTheirSources(t *testing.T) {
	cfg := DevConfig("dlq")
	s := synth(t, cfg, nil)
	j := s.jobs
	// A stack with another lane: synthesized by synthIAM (the example
	// kinds' lanes).
	d := synthIAM(t, "dlq-lanes", false)
	for _, tc := range []struct {
		name string
		t    *cfnTemplate
		res  map[string]string
	}{
		{"default lane", s.t, map[string]string{"queue": s.id(j.Queue), "dlq": s.id(j.DLQ), "scheduledlq": s.id(j.ScheduleDLQ), "role/scheduler": s.id(j.SchedulerRole)}},
		{"lanes", d.t, d.res},
	} {
		pairs := map[string]string{} // DLQ -> its source queue
		for r, id := range tc.res {
			if lane, ok := strings.CutPrefix(r, "dlq/"); ok {
				pairs[id] = tc.res["queue/"+lane]
			}
		}
		pairs[tc.res["dlq"]] = tc.res["queue"]
		if tc.name == "lanes" && len(pairs) < 2 {
			t.Fatalf("%s: %d DLQs: the example kinds' lanes are missing", tc.name, len(pairs))
		}
		// RedriveAllowPolicy: set by a custom resource, once both queues
		// exist, to byQueue with the DLQ's own source.
		set := map[string]string{}
		for id, r := range tc.t.resources {
			if r.Type != "Custom::AWS" {
				continue
			}
			create, err := tc.t.resolveString(r.Properties["Create"])
			if err != nil {
				t.Fatal(err)
			}
			update, _ := tc.t.resolveString(r.Properties["Update"])
			if update != create {
				t.Errorf("%s: %s sets on update %s, on create %s", tc.name, id, update, create)
			}
			var call struct {
				Action     string
				Parameters struct {
					QueueURL   string `json:"QueueUrl"`
					Attributes map[string]string
				}
			}
			if err := json.Unmarshal([]byte(create), &call); err != nil || call.Action != "setQueueAttributes" {
				t.Errorf("%s: %s: %v %s", tc.name, id, err, create)
				continue
			}
			set[call.Parameters.QueueURL] = call.Parameters.Attributes["RedriveAllowPolicy"]
		}
		for dlq, source := range pairs {
			url, _ := tc.t.ref(dlq)
			arn, _ := tc.t.getAtt(source, "Arn")
			want := `{"redrivePermission":"byQueue","sourceQueueArns":["` + arn + `"]}`
			if got := set[url]; got != want {
				t.Errorf("%s: DLQ %s: RedriveAllowPolicy %s, want %s", tc.name, dlq, got, want)
			}
			if deny := sendDenial(t, tc.t, dlq); deny != `{"Action":"sqs:SendMessage","Effect":"Deny","Principal":{"AWS":"*"},"Resource":"`+mustAtt(t, tc.t, dlq)+`","Sid":"NoSenders"}` {
				t.Errorf("%s: DLQ %s: the denial of senders is %s", tc.name, dlq, deny)
			}
		}
		if len(set) != len(pairs) {
			t.Errorf("%s: %d RedriveAllowPolicy settings for %d DLQs", tc.name, len(set), len(pairs))
		}
		sched := tc.t.resources[tc.res["scheduledlq"]]
		if got := jsonString(sched.Properties["RedriveAllowPolicy"]); got != `{"redrivePermission":"denyAll"}` {
			t.Errorf("%s: the schedules' DLQ's RedriveAllowPolicy is %s", tc.name, got)
		}
		role, _ := tc.t.getAtt(tc.res["role/scheduler"], "Arn")
		want := `{"Action":"sqs:SendMessage","Condition":{"ArnNotLike":{"aws:PrincipalArn":"` + role + `"}},"Effect":"Deny","Principal":{"AWS":"*"},"Resource":"` + mustAtt(t, tc.t, tc.res["scheduledlq"]) + `","Sid":"OnlyItsSender"}`
		if deny := sendDenial(t, tc.t, tc.res["scheduledlq"]); deny != want {
			t.Errorf("%s: the schedules' DLQ's denial of senders is %s, want %s", tc.name, deny, want)
		}
	}
	// The custom resource may set attributes on the DLQs only.
	for id, r := range s.t.resources {
		if r.Type == "AWS::IAM::Policy" && strings.Contains(id, "RedriveAllowPolicy") {
			doc := jsonString(r.Properties["PolicyDocument"])
			if !strings.Contains(doc, `"Action":"sqs:SetQueueAttributes"`) || strings.Contains(doc, `"Resource":"*"`) {
				t.Errorf("%s: %s", id, doc)
			}
		}
	}
}

// sendDenial is the statement of a queue's policy that denies
// sqs:SendMessage, resolved ("" for none).
func sendDenial(t *testing.T, tmpl *cfnTemplate, queue string) string {
	t.Helper()
	doc, err := tmpl.resourcePolicy(queue)
	if err != nil || doc == nil {
		t.Fatalf("queue %s: no policy (%v)", queue, err)
	}
	for _, st := range doc["Statement"].([]any) {
		m := st.(map[string]any)
		if m["Effect"] == "Deny" && m["Action"] == "sqs:SendMessage" {
			return jsonString(m)
		}
	}
	return ""
}

func mustAtt(t *testing.T, tmpl *cfnTemplate, id string) string {
	t.Helper()
	arn, err := tmpl.getAtt(id, "Arn")
	if err != nil {
		t.Fatal(err)
	}
	return arn
}

// The bus the construct creates denies events:PutEvents to every
// principal but those GrantPutEvents named: the functions that write
// outcomes and a team's own.
func TestBusDeniesAllButItsPublishers(t *testing.T) {
	var team awsiam.Role
	s := synth(t, DevConfig("bus"), func(stack awscdk.Stack, j *Jobs) {
		team = awsiam.NewRole(stack, jsii.String("Announcer"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
		j.GrantPutEvents(team)
	})
	j := s.jobs
	bus := s.id(j.EventBus)
	doc, err := s.t.resourcePolicy(bus)
	if err != nil || doc == nil {
		t.Fatalf("the bus has no policy (%v)", err)
	}
	sts := doc["Statement"].([]any)
	if len(sts) != 1 {
		t.Fatalf("the bus's policy: %s", jsonString(doc))
	}
	st := sts[0].(map[string]any)
	arn, _ := s.t.getAtt(bus, "Arn")
	if st["Effect"] != "Deny" || jsonString(st["Principal"]) != `{"AWS":"*"}` || st["Action"] != "events:PutEvents" || st["Resource"] != arn {
		t.Errorf("the bus's policy: %s", jsonString(st))
	}
	var got []string
	for _, p := range st["Condition"].(map[string]any)["ArnNotLike"].(map[string]any)["aws:PrincipalArn"].([]any) {
		got = append(got, p.(string))
	}
	want := []string{}
	for _, f := range []string{"worker", "sweeper", "cancel"} {
		want = append(want, mustAtt(t, s.t, s.id(j.Functions[f].Role())))
	}
	want = append(want, mustAtt(t, s.t, s.id(team)))
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the bus admits %v, want %v", got, want)
	}
	// A bus of Config.EventBusArn is not the construct's: no policy.
	cfg := DevConfig("ownbus")
	cfg.EventBusArn = "arn:aws:events:" + testRegion + ":" + testAccount + ":event-bus/theirs"
	if n := len(synth(t, cfg, nil).of("AWS::Events::EventBusPolicy")); n != 0 {
		t.Errorf("%d bus policies for a bus the construct does not own", n)
	}
}

// GrantPutEvents names its grantee in the bus policy: a principal it
// cannot name is refused with a clear message, before any grant.
func TestGrantPutEventsNeedsARoleOrUser(t *testing.T) {
	defer func() {
		p := recover()
		if p == nil || !strings.Contains(fmt.Sprint(p), "GrantPutEvents: give a function with its role, a role or a user") {
			t.Errorf("panic %v", p)
		}
	}()
	synth(t, DevConfig("busgrant"), func(stack awscdk.Stack, j *Jobs) {
		j.GrantPutEvents(awsiam.NewAccountRootPrincipal())
	})
}

// Every grant of the customer-managed key the construct makes holds only
// through the service that calls KMS for the grantee (kms:ViaService) and
// for this account (kms:CallerAccount); the key's own policy refuses a
// direct use to anyone but an AWS service, which also bounds the
// kms:Decrypt CDK's SQS event source grants the workers without
// conditions (TestEveryCallIsAllowedByTheDeployedPolicies tries it).
func TestKeyGrantsGoThroughTheirService(t *testing.T) {
	cfg := DevConfig("via")
	cfg.CustomerManagedKey = true
	s := synth(t, cfg, func(stack awscdk.Stack, j *Jobs) {
		r := awsiam.NewRole(stack, jsii.String("Reader"), &awsiam.RoleProps{AssumedBy: awsiam.NewAccountRootPrincipal()})
		j.GrantReadJobs(r)
	})
	key := s.id(s.jobs.Key)
	vias := map[string]bool{}
	grants := 0
	for id, r := range s.of("AWS::IAM::Policy") {
		doc, err := s.t.resolve(r.Properties["PolicyDocument"])
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range doc.(map[string]any)["Statement"].([]any) {
			m := st.(map[string]any)
			if !strings.Contains(jsonString(m["Action"]), "kms:") {
				continue
			}
			conds, _ := m["Condition"].(map[string]any)
			cond, _ := conds["StringEquals"].(map[string]any)
			if cond == nil && jsonString(m["Action"]) == `"kms:Decrypt"` && isWorkerPolicy(s, id) {
				continue // CDK's SQS event source: bounded by the key policy
			}
			grants++
			via, _ := cond["kms:ViaService"].(string)
			if cond["kms:CallerAccount"] != testAccount || !strings.HasSuffix(via, "."+testRegion+".amazonaws.com") {
				t.Errorf("%s: a grant of the key without its service and account: %s", id, jsonString(m))
			}
			vias[strings.Split(via, ".")[0]] = true
		}
	}
	if got := slices.Sorted(maps.Keys(vias)); grants == 0 || jsonString(got) != `["dynamodb","secretsmanager","sqs"]` {
		t.Errorf("%d grants through %v", grants, got)
	}
	policy, err := s.t.resolve(s.t.resources[key].Properties["KeyPolicy"])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Action":["kms:Decrypt","kms:Encrypt","kms:GenerateDataKey*","kms:ReEncrypt*"],` +
		`"Condition":{"BoolIfExists":{"aws:PrincipalIsAWSService":"false"},"StringNotEquals":{"kms:ViaService":["dynamodb.us-east-1.amazonaws.com","sqs.us-east-1.amazonaws.com","secretsmanager.us-east-1.amazonaws.com"]}},` +
		`"Effect":"Deny","Principal":{"AWS":"*"},"Resource":"*","Sid":"OnlyThroughItsServices"}`
	found := false
	for _, st := range policy.(map[string]any)["Statement"].([]any) {
		found = found || jsonString(st) == want
	}
	if !found {
		t.Errorf("the key policy lacks\n  %s\n%s", want, jsonString(policy))
	}
}

// isWorkerPolicy reports whether the policy with this logical id is a
// lane worker's role's.
func isWorkerPolicy(s *synthesized, id string) bool {
	for _, w := range s.jobs.workers() {
		if strings.Contains(jsonString(s.t.resources[id].Properties["Roles"]), s.id(w.Role())) {
			return true
		}
	}
	return false
}

// CDK's handler that puts the S3 sources' notification configurations
// may change those buckets' notifications only.
func TestBucketNotificationsOnlyOnTheSourceBuckets(t *testing.T) {
	cfg := DevConfig("s3")
	cfg.S3Sources = []S3Source{{BucketName: "uploads-example"}, {BucketName: "more-uploads", Prefix: "in/"}}
	s := synth(t, cfg, nil)
	var handlerRole string
	for id := range s.of("AWS::IAM::Role") {
		if strings.HasPrefix(id, "BucketNotificationsHandler") {
			handlerRole = id
		}
	}
	if handlerRole == "" {
		t.Fatal("no bucket notifications handler")
	}
	docs, err := s.t.identityPolicies(handlerRole)
	if err != nil {
		t.Fatal(err)
	}
	var buckets []string
	for _, doc := range docs {
		for _, st := range asList(doc["Statement"]) {
			m := st.(map[string]any)
			if jsonString(m["Action"]) != `["s3:GetBucketNotification","s3:PutBucketNotification"]` || m["Effect"] != "Allow" {
				t.Errorf("the handler may %s", jsonString(m))
			}
			for _, r := range asList(m["Resource"]) {
				buckets = append(buckets, r.(string))
			}
		}
	}
	slices.Sort(buckets)
	if want := []string{"arn:aws:s3:::more-uploads", "arn:aws:s3:::uploads-example"}; !slices.Equal(buckets, want) {
		t.Errorf("the handler may change the notifications of %v, want %v", buckets, want)
	}
}
