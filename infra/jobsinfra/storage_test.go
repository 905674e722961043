package jobsinfra

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

func TestQueuePair(t *testing.T) {
	for name, s := range environments(t) {
		worker := s.function(t, "worker")["Timeout"].(float64)
		queues := s.resources("AWS::SQS::Queue")
		for id := range queues {
			if strings.Contains(id, "ScheduleDeadLetters") {
				delete(queues, id) // the schedules' DLQ: see TestSchedules
			}
		}
		if len(queues) != 2 {
			t.Fatalf("%s: %d queues", name, len(queues))
		}
		var main, dlq map[string]any
		for _, q := range queues {
			if props(q)["RedrivePolicy"] != nil {
				main = props(q)
			} else {
				dlq = props(q)
			}
		}
		// A dead worker's job comes back by redelivery: after two worker
		// timeouts and the batching window, the dead-worker bound.
		if v, want := main["VisibilityTimeout"].(float64), 2*worker+s.cfg.BatchWindow.Seconds(); v != want {
			t.Errorf("%s: visibility %gs, want %gs (2 x worker timeout %gs + batching window)", name, v, want, worker)
		}
		if n := main["RedrivePolicy"].(map[string]any)["maxReceiveCount"].(float64); n != 10 {
			t.Errorf("%s: maxReceiveCount %g, want 10", name, n)
		}
		// A queued job's message is its safety net: both queues keep
		// messages for SQS's maximum.
		for which, q := range map[string]map[string]any{"queue": main, "DLQ": dlq} {
			if q["MessageRetentionPeriod"] != float64(14*24*3600) {
				t.Errorf("%s: %s retention %v, want 14 days", name, which, q["MessageRetentionPeriod"])
			}
		}
		for which, q := range map[string]map[string]any{"queue": main, "DLQ": dlq} {
			cmk := strings.Contains(jsonString(q["KmsMasterKeyId"]), "JobsKey")
			if q["SqsManagedSseEnabled"] != true && !(s.cfg.CustomerManagedKey && cmk) {
				t.Errorf("%s: %s without SSE", name, which)
			}
		}
		// Enforced TLS: a Deny on aws:SecureTransport false for every queue
		// (both, and the schedules' DLQ).
		tls, want := 0, 3
		for _, p := range s.resources("AWS::SQS::QueuePolicy") {
			doc := jsonString(props(p)["PolicyDocument"])
			if strings.Contains(doc, `"aws:SecureTransport":"false"`) && strings.Contains(doc, `"Effect":"Deny"`) {
				tls += len(props(p)["Queues"].([]any))
			}
		}
		if tls != want {
			t.Errorf("%s: TLS enforced on %d queues, want %d", name, tls, want)
		}
	}
}

func TestTablePerEnvironment(t *testing.T) {
	for name, s := range environments(t) {
		tables := s.resources("AWS::DynamoDB::Table")
		if len(tables) != 1 {
			t.Fatalf("%s: %d tables", name, len(tables))
		}
		for _, tbl := range tables {
			p := props(tbl)
			if p["BillingMode"] != "PAY_PER_REQUEST" || jsonString(p["TimeToLiveSpecification"]) != `{"AttributeName":"expires","Enabled":true}` {
				t.Errorf("%s: billing %v TTL %v", name, p["BillingMode"], p["TimeToLiveSpecification"])
			}
			gsi := jsonString(p["GlobalSecondaryIndexes"])
			if !strings.Contains(gsi, `"IndexName":"sweep"`) || !strings.Contains(gsi, `"ProjectionType":"KEYS_ONLY"`) {
				t.Errorf("%s: index %s", name, gsi)
			}
			pitr := p["PointInTimeRecoverySpecification"].(map[string]any)["PointInTimeRecoveryEnabled"]
			retained := tbl["DeletionPolicy"] == "Retain" && tbl["UpdateReplacePolicy"] == "Retain"
			if name == "prod" {
				if !retained || pitr != true || p["DeletionProtectionEnabled"] != true {
					t.Errorf("prod: retained %v, PITR %v, deletion protection %v", retained, pitr, p["DeletionProtectionEnabled"])
				}
			} else if tbl["DeletionPolicy"] != "Delete" || pitr == true {
				t.Errorf("%s: deletion policy %v, PITR %v", name, tbl["DeletionPolicy"], pitr)
			}
		}
	}
}

// The listing's two indexes, each projecting only what never changes
// under its entries (so an entry is written once), and who may read them:
// getjob and cancel query only those two, and read the page token key.
func TestListingIndexesAndGrants(t *testing.T) {
	for name, s := range environments(t) {
		var table map[string]any
		for _, r := range s.resources("AWS::DynamoDB::Table") {
			table = props(r)
		}
		gsis := map[string]string{}
		for _, g := range table["GlobalSecondaryIndexes"].([]any) {
			gm := g.(map[string]any)
			gsis[gm["IndexName"].(string)] = jsonString(gm["KeySchema"]) + jsonString(gm["Projection"])
		}
		for index, want := range map[string][]string{
			"owner":           {`"AttributeName":"lo","KeyType":"HASH"`, `"AttributeName":"lc","KeyType":"RANGE"`, `"NonKeyAttributes":["kind"],"ProjectionType":"INCLUDE"`},
			"owner_attention": {`"AttributeName":"ls","KeyType":"HASH"`, `"AttributeName":"lc","KeyType":"RANGE"`, `"NonKeyAttributes":["kind","status"],"ProjectionType":"INCLUDE"`},
			// Flow control: the queued jobs that wait (a park puts the job in
			// it), and the queued jobs of capped kinds (only theirs carry kc).
			"owner_waiting": {`"AttributeName":"uq","KeyType":"HASH"`, `"AttributeName":"wo","KeyType":"RANGE"`, `"NonKeyAttributes":["kind"],"ProjectionType":"INCLUDE"`},
			"kind_queued":   {`"AttributeName":"kc","KeyType":"HASH"`, `"AttributeName":"uq","KeyType":"RANGE"`, `"ProjectionType":"KEYS_ONLY"`},
			// Tags: one index a tag a job may carry, written once a tag.
			"owner_tag1": {`"AttributeName":"t1","KeyType":"HASH"`, `"AttributeName":"lc","KeyType":"RANGE"`, `"NonKeyAttributes":["kind"],"ProjectionType":"INCLUDE"`},
		} {
			for _, w := range want {
				if !strings.Contains(gsis[index], w) {
					t.Errorf("%s: index %s %s lacks %s", name, index, gsis[index], w)
				}
			}
		}
		// Config.TagIndexes: a stack from before tags adds one a deploy
		// (CloudFormation adds one index to a table per update).
		for i, index := range []string{"owner_tag2", "owner_tag3"} {
			want := `"AttributeName":"t` + strconv.Itoa(i+2) + `","KeyType":"HASH"`
			if got, declared := gsis[index]; declared == (name == "tuned") || (declared && !strings.Contains(got, want)) {
				t.Errorf("%s: index %s declared %v (%s)", name, index, declared, got)
			}
		}
		// The enqueue function counts queued jobs for the caps, and the
		// worker for its handlers' children's: each may query the capped
		// kinds' index and the queued one, no other.
		for _, fn := range []string{"enqueue", "worker"} {
			role := s.function(t, fn)["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
			queries := 0
			for _, pol := range s.resources("AWS::IAM::Policy") {
				p := props(pol)
				if !strings.Contains(jsonString(p["Roles"]), role) {
					continue
				}
				for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					stmt := jsonString(st)
					if !strings.Contains(stmt, `"dynamodb:Query"`) {
						continue
					}
					queries++
					if !strings.Contains(stmt, "/index/kind_queued") || !strings.Contains(stmt, "/index/owner_queued") ||
						strings.Contains(stmt, "/index/owner\"") || strings.Contains(stmt, "/index/sweep") {
						t.Errorf("%s %s may query %s", name, fn, stmt)
					}
				}
			}
			if queries == 0 {
				t.Errorf("%s: the %s function may not count queued jobs (a capped kind would get 503)", name, fn)
			}
		}
		for _, fn := range []string{"getjob", "cancel"} {
			f := s.function(t, fn)
			if !strings.Contains(jsonString(f["Environment"]), "JOBS_PAGE_TOKEN_SECRET") {
				t.Errorf("%s %s: no page token secret", name, fn)
			}
			role := f["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
			for _, pol := range s.resources("AWS::IAM::Policy") {
				p := props(pol)
				if !strings.Contains(jsonString(p["Roles"]), role) {
					continue
				}
				for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					stmt := jsonString(st)
					if strings.Contains(stmt, `"dynamodb:Query"`) && (!strings.Contains(stmt, "/index/owner") || strings.Contains(stmt, "/index/sweep")) {
						t.Errorf("%s %s may query %s", name, fn, stmt)
					}
					if strings.Contains(stmt, "secretsmanager:GetSecretValue") && (!strings.Contains(stmt, "PageTokenSecret") || strings.Contains(stmt, "PayloadSecret")) {
						t.Errorf("%s %s may read %s", name, fn, stmt)
					}
				}
			}
		}
	}
}

// A retained environment (prod) keeps every queue, the dead-letter queues
// included, and the table when the stack is deleted or a resource is
// replaced; any other environment deletes them with the stack.
func TestRetainedEnvironmentsKeepTheQueuesAndTheTable(t *testing.T) {
	for name, s := range environments(t) {
		want := "Delete"
		if s.cfg.Retain {
			want = "Retain"
		}
		queues := s.resources("AWS::SQS::Queue")
		if len(queues) < 3 {
			t.Fatalf("%s: %d queues, want the queue pair and the schedules' DLQ at least", name, len(queues))
		}
		for id, r := range queues {
			if r["DeletionPolicy"] != want || r["UpdateReplacePolicy"] != want {
				t.Errorf("%s: queue %s: DeletionPolicy %v, UpdateReplacePolicy %v, want %s", name, id, r["DeletionPolicy"], r["UpdateReplacePolicy"], want)
			}
		}
		for id, r := range s.resources("AWS::DynamoDB::Table") {
			if r["DeletionPolicy"] != want || r["UpdateReplacePolicy"] != want {
				t.Errorf("%s: table %s: DeletionPolicy %v, UpdateReplacePolicy %v, want %s", name, id, r["DeletionPolicy"], r["UpdateReplacePolicy"], want)
			}
		}
	}
}

// docs/evidence/RELIABILITY.md states the dead-worker bound in minutes for dev and
// prod: the presets' queue visibility (two worker timeouts and the
// batching window, from sqsqueue's one definition), which the template
// holds (TestQueuePair).
func TestDeadWorkerBoundIsStated(t *testing.T) {
	raw, err := os.ReadFile("../../docs/evidence/RELIABILITY.md")
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`\s+`).ReplaceAllString(string(raw), " ")
	m := regexp.MustCompile(`about (\d+) minutes in dev .*? and (\d+) in prod`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("docs/evidence/RELIABILITY.md no longer states the dead-worker bound as this test reads it")
	}
	for i, cfg := range []Config{DevConfig("dev"), ProdConfig("prod")} {
		bound := sqsqueue.SpecFor(cfg.WorkerTimeout, cfg.BatchWindow).VisibilityTimeout
		if stated := m[i+1]; stated != strconv.Itoa(int(bound.Round(time.Minute)/time.Minute)) {
			t.Errorf("docs/evidence/RELIABILITY.md states the dead-worker bound in %s as about %s minutes; its visibility timeout is %v", cfg.Name, stated, bound)
		}
	}
}
