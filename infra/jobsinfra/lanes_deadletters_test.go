package jobsinfra

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

// The function serving the operators' dead-letter routes (cancel) is told
// every other lane's dead-letter queue and may read, release and delete
// the messages of each lane's (and send to each lane's queue, which
// TestEverySenderMaySendToEveryLane shows).
func TestCancelServesEveryLanesDeadLetters(t *testing.T) {
	servesEveryLanesDeadLetters(t, synthLanes(t), "cancel")
}

// The sweeper, which drains every lane's dead-letter queue at each sweep,
// is told each of them and may read, release and delete their messages.
func TestSweeperDrainsEveryLanesDeadLetters(t *testing.T) {
	servesEveryLanesDeadLetters(t, synthLanes(t), "sweeper")
}

// servesEveryLanesDeadLetters checks that the function fn is told the
// default lane's DLQ and every other lane's, and may receive, release and
// delete the messages of each.
func servesEveryLanesDeadLetters(t *testing.T, s *laneStack, fn string) {
	t.Helper()
	f := s.jobs.Functions[fn]
	fnID := *s.stack.GetLogicalId(f.Node().DefaultChild().(awscdk.CfnElement))
	roleID := *s.stack.GetLogicalId(f.Role().Node().DefaultChild().(awscdk.CfnElement))
	vars := s.t.resources[fnID].Properties["Environment"].(map[string]any)["Variables"].(map[string]any)
	urls := jsonString(vars["JOBS_LANE_DLQ_URLS"])
	if !strings.Contains(jsonString(vars["JOBS_DLQ_URL"]), s.logicalID("", "dlq")) {
		t.Errorf("%s: JOBS_DLQ_URL %s is not the default lane's dead-letter queue", fn, jsonString(vars["JOBS_DLQ_URL"]))
	}
	policies, err := s.t.identityPolicies(roleID)
	if err != nil {
		t.Fatal(err)
	}
	// resources are those of the statements allowing every action of a
	// redrive's reads.
	var resources []string
	for _, doc := range policies {
		for _, st := range asList(doc["Statement"]) {
			st := st.(map[string]any)
			actions := jsonString(st["Action"])
			if st["Effect"] != "Allow" {
				continue
			}
			if strings.Contains(actions, "sqs:ReceiveMessage") && strings.Contains(actions, "sqs:DeleteMessage") && strings.Contains(actions, "sqs:ChangeMessageVisibility") {
				resources = append(resources, jsonString(st["Resource"]))
			}
		}
	}
	for _, lane := range []string{"", "bulk", "long", "urgent"} {
		dlq := s.logicalID(lane, "dlq")
		if lane != "" && !strings.Contains(urls, dlq) {
			t.Errorf("%s: JOBS_LANE_DLQ_URLS %s lacks lane %s's dead-letter queue", fn, urls, lane)
		}
		if !slices.ContainsFunc(resources, func(r string) bool { return strings.Contains(r, dlq) }) {
			t.Errorf("%s may not receive, release and delete lane %q's dead letters: %v", fn, lane, resources)
		}
	}
	if strings.Contains(urls, s.logicalID("", "dlq")) {
		t.Errorf("%s: JOBS_LANE_DLQ_URLS names the default lane's DLQ (JOBS_DLQ_URL does): %s", fn, urls)
	}
}
