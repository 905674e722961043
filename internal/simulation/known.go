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
