package localstack

import (
	"slices"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// A lane's worker on the local stack has its lane's timeout (the long
// lane's own, by default a minute; any other lane the default lane's),
// and, as the construct gives it, a handler reserve and final write grown
// for a timeout long enough (jobs.Deadlines.ForTimeout), from the
// functions' configured ones.
func TestLaneWorkersFollowTheirTimeout(t *testing.T) {
	t.Parallel()
	cfg := Config{WorkerTimeout: 5 * time.Second}.withDefaults()
	if got := cfg.LaneTimeout("long"); got != time.Minute {
		t.Errorf("the long lane's default timeout %v, want 1m", got)
	}
	for _, lane := range []string{"", "bulk", "urgent"} {
		if got := cfg.LaneTimeout(lane); got != 5*time.Second {
			t.Errorf("lane %q: timeout %v, want the default lane's 5s", lane, got)
		}
	}
	// What a lane's worker is told beyond the functions' values.
	told := func(lane string) []string {
		var out []string
		for k, v := range cfg.laneWorkerValues(lane, deploy.Values[string]{}).For(deploy.Worker, deploy.Worker) {
			if k != "JOBS_FUNCTION" {
				out = append(out, k+"="+v)
			}
		}
		slices.Sort(out)
		return out
	}
	if got, want := told("long"), []string{"JOBS_LANE=long", "JOBS_WORKER_TIMEOUT=1m0s"}; !slices.Equal(got, want) {
		t.Errorf("a 1-minute lane's worker is told %v, want %v: its reserve is the functions'", got, want)
	}
	cfg.LaneTimeouts = map[string]time.Duration{"long": 15 * time.Minute}
	cfg.FunctionEnv = []string{"JOBS_HANDLER_RESERVE=4s", "JOBS_FINAL_WRITE_TIMEOUT=3s"}
	want := []string{"JOBS_FINAL_WRITE_TIMEOUT=5s", "JOBS_HANDLER_RESERVE=6s", "JOBS_LANE=long", "JOBS_WORKER_TIMEOUT=15m0s"}
	if got := told("long"); !slices.Equal(got, want) {
		t.Errorf("a 15-minute lane's worker is told %v, want %v", got, want)
	}
}
