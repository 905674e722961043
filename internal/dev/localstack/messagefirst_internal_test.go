package localstack

import (
	"slices"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// The local stack runs as a new stack of the construct does: every
// function that reads JOBS_MESSAGE_FIRST is told on, alike; a lane's
// worker too. Config.FunctionEnv, which comes last, can turn it off.
func TestFunctionsRunWithTheMessageFirst(t *testing.T) {
	t.Parallel()
	s := &Stack{cfg: Config{WorkerTimeout: 5 * time.Second, LaneTimeouts: map[string]time.Duration{"long": time.Minute}}.withDefaults()}
	if err := s.setFunctionEnv(); err != nil {
		t.Fatal(err)
	}
	const on = "JOBS_MESSAGE_FIRST=on"
	for _, f := range deploy.Functions {
		env := s.envOf(f.Name, s.values)
		if got, want := slices.Contains(env, on), deploy.EnvMessageFirst.ReadBy(f.Name); got != want {
			t.Errorf("%s: told %s %v, want %v (it reads it: %v)", f.Name, on, got, want, want)
		}
	}
	if env := s.envOf(deploy.Worker, s.cfg.laneWorkerValues("long", s.values)); !slices.Contains(env, on) {
		t.Errorf("the long lane's worker is not told %s", on)
	}
	s.cfg.FunctionEnv = []string{"JOBS_MESSAGE_FIRST=off"}
	if env := s.envOf(deploy.Worker, s.values); env[len(env)-1] != "JOBS_MESSAGE_FIRST=off" {
		t.Errorf("Config.FunctionEnv does not come last: %v", env)
	}
}
