package simulation

import "strings"

// A finding is a class of violation the simulator finds in today's code,
// each a defect listed with the behaviour it must have in the seam fixes
// (docs/SIMULATION.md, "What it finds"). TestSimulation tolerates these
// and fails on any other violation; it also fails when a class is no
// longer found in its seeds, so that fixing a defect removes its entry.
type finding struct {
	name string
	// match reports whether violation v of a run with trace is this
	// finding.
	match func(v string, trace []string) bool
}

var knownFindings = []finding{
	{
		// A heartbeat kind's lease lapses while its handler still runs
		// within its invocation (a heartbeat that is slow or refused, a
		// cancel after which heartbeats stop renewing); the sweeper ends
		// the run and a retry starts beside it.
		name: "a heartbeat lease lapses under a running handler",
		match: func(v string, trace []string) bool {
			return strings.HasPrefix(v, "two runs of job ") && kindOfJob(v, trace) == kindLong
		},
	},
}

// classify returns the known finding v is, or "".
func classify(v string, trace []string) string {
	for _, f := range knownFindings {
		if f.match(v, trace) {
			return f.name
		}
	}
	return ""
}

func traceHas(trace []string, s string) bool {
	for _, l := range trace {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// kindOfJob finds the kind of the job a violation names, from the trace's
// run lines.
func kindOfJob(v string, trace []string) string {
	f := strings.Fields(v)
	if len(f) < 5 {
		return ""
	}
	job := f[4]
	for _, l := range trace {
		if strings.Contains(l, "run "+job+" ") {
			return strings.Fields(l[strings.Index(l, "run "+job+" "):])[2]
		}
	}
	return ""
}
