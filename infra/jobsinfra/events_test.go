package jobsinfra

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
)

// eventSenders are the job events' sends each function makes whose
// environment names the bus (JOBS_EVENT_BUS): events:PutEvents on it.
func (d *iamDeployment) eventSenders() []authz {
	var out []authz
	for principal, vars := range d.functionEnvs() {
		if vars["JOBS_EVENT_BUS"] != nil {
			out = append(out, authz{principal: principal, action: "events:PutEvents", resource: "bus", why: "job events: JOBS_EVENT_BUS"})
		}
	}
	return out
}

// The construct creates the job events' bus, tells exactly the functions
// that write outcomes (internal/deploy's readers of JOBS_EVENT_BUS) where
// it is, and lets exactly them put events on it: evaluated against the
// synthesized policies, the others are denied.
func TestOnlyOutcomeWritersMayPutJobEvents(t *testing.T) {
	d := synthIAM(t, "events", false)
	buses := 0
	for _, r := range d.t.resources {
		if r.Type == "AWS::Events::EventBus" {
			buses++
			if name, _ := d.t.resolveString(r.Properties["Name"]); name == "" {
				t.Errorf("the bus has no derived name")
			}
		}
	}
	if buses != 1 {
		t.Fatalf("%d event buses, want 1", buses)
	}
	senders := d.eventSenders()
	var got []string
	for _, a := range senders {
		got = append(got, a.principal)
	}
	sort.Strings(got)
	busVar, _ := deploy.Lookup("JOBS_EVENT_BUS")
	var want []string
	for _, f := range FunctionNames {
		if busVar.ReadBy(f) {
			want = append(want, f)
		}
	}
	readers := len(want)
	// Every other lane's worker writes outcomes too.
	for role := range d.roles {
		if strings.HasPrefix(role, iamcalls.LaneWorker("")) && role != "worker" {
			want = append(want, role)
		}
	}
	sort.Strings(want)
	if !slices.Equal(got, want) || readers != 3 || len(want) != 6 {
		t.Fatalf("functions told JOBS_EVENT_BUS: %v, want %v (cancel, sweeper, worker and the bulk, long and urgent lanes' workers)", got, want)
	}
	var denied []authz
	for _, f := range FunctionNames {
		if !busVar.ReadBy(f) {
			denied = append(denied, authz{principal: f, action: "events:PutEvents", resource: "bus", why: "negative control"})
		}
	}
	denied = append(denied, authz{principal: "worker", action: "events:PutEvents", resource: "arn:aws:events:" + testRegion + ":" + testAccount + ":event-bus/default", why: "another bus"})
	results := d.evaluate(t, append(slices.Clone(senders), denied...))
	for i, a := range senders {
		if results[i] != "Allowed" {
			t.Errorf("AWS would refuse: %s: %s", a, results[i])
		}
	}
	for i, a := range denied {
		if r := results[len(senders)+i]; r != "ExplicitlyDenied" && r != "ImplicitlyDenied" {
			t.Errorf("AWS would allow: %s: %s", a, r)
		}
	}
}

// Given a bus (Config.EventBusArn), the construct creates none and grants
// and names the one given; JOBS_EVENTS follows Config.AllEvents.
func TestGivenEventBusAndAllEvents(t *testing.T) {
	cfg := DevConfig("givenbus")
	cfg.EventBusArn = "arn:aws:events:" + testRegion + ":" + testAccount + ":event-bus/shared"
	cfg.AllEvents = true
	s := synth(t, cfg, nil)
	if n := len(s.of("AWS::Events::EventBus")); n != 0 {
		t.Fatalf("%d buses created with a bus given", n)
	}
	modeVar, _ := deploy.Lookup("JOBS_EVENTS")
	for _, f := range s.of("AWS::Lambda::Function") {
		env := jsonString(f.Properties["Environment"])
		desc := fmt.Sprint(f.Properties["Description"])
		if strings.Contains(env, `"JOBS_EVENT_BUS"`) && !strings.Contains(env, cfg.EventBusArn) {
			t.Errorf("%s: JOBS_EVENT_BUS is not the given bus: %s", desc, env)
		}
	}
	policies := jsonString(s.of("AWS::IAM::Policy"))
	if !strings.Contains(policies, cfg.EventBusArn) || !strings.Contains(policies, "events:PutEvents") {
		t.Fatalf("no events:PutEvents on the given bus in the policies")
	}
	told := 0
	for _, f := range s.of("AWS::Lambda::Function") {
		if strings.Contains(jsonString(f.Properties["Environment"]), `"JOBS_EVENTS":"all"`) {
			told++
		}
	}
	readers := 0
	for _, f := range FunctionNames {
		if modeVar.ReadBy(f) {
			readers++
		}
	}
	if told != readers {
		t.Fatalf("%d functions told JOBS_EVENTS=all, want %d", told, readers)
	}
}
