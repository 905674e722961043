package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
)

// lanesResult is the lanes step: urgent jobs started behind a bulk
// backlog.
type lanesResult struct {
	Race     localstack.LaneRace
	P50, Max time.Duration
}

// lanesBulk and lanesUrgent are the lanes step's sizes: 2,000 bulk jobs of
// 100 ms (about 40 s of work for the bulk lane's one worker), then 5
// urgent jobs one after another.
const lanesBulk, lanesUrgent = 2000, 5

// lanes runs the local stack with its example lanes (one worker instance
// each), queues 2,000 example.hold_bulk jobs in the bulk lane, and times
// how soon example.hold_urgent jobs start while the backlog is there.
func lanes(ctx context.Context) (lanesResult, error) {
	root, err := localaws.FindRoot()
	if err != nil {
		return lanesResult{}, err
	}
	stack, err := localstack.Start(ctx, localstack.Config{
		Root: root, Bootstraps: filepath.Join(root, "build", "local"), RIE: filepath.Join(root, "bin", "aws-lambda-rie"),
		APIAddr: "127.0.0.1:0", Table: "bench-lanes", Queue: "bench-lanes", WorkerInstances: 1, BatchSize: 10,
		StartPaused: true, FunctionEnv: []string{deploy.EnvWorkerConcurrency.Name + "=10"},
	})
	if err != nil {
		return lanesResult{}, err
	}
	defer stack.Stop()
	race, err := stack.UrgentBehindBulk(ctx, localstack.LaneLoad{Kind: examplekinds.HoldBulk, Payload: json.RawMessage(`{"ms":100}`), Jobs: lanesBulk},
		localstack.LaneLoad{Kind: examplekinds.HoldUrgent, Payload: json.RawMessage(`{"ms":0}`), Jobs: lanesUrgent})
	if err != nil {
		return lanesResult{}, err
	}
	sorted := slices.Sorted(slices.Values(race.Starts))
	return lanesResult{Race: race, P50: sorted[len(sorted)/2], Max: sorted[len(sorted)-1]}, nil
}

func (r *report) lanesMD() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	l := r.Lanes
	w("## 6. An urgent job behind a bulk backlog (lanes)\n\n")
	w("The local stack with the example lanes, one worker instance each (docs/guide/LANES.md): %s\n", thousands(l.Race.BulkQueued))
	w("`example.hold_bulk` jobs of 100 ms queued in the bulk lane before its worker starts, then %d\n", len(l.Race.Starts))
	w("`example.hold_urgent` jobs enqueued one after another while the bulk lane works through its\n")
	w("backlog. Start is the urgent job's claim after its enqueue answered.\n\n")
	w("| urgent job | start after enqueue | bulk jobs still queued |\n|---|---|---|\n")
	for i, d := range l.Race.Starts {
		w("| %d | %v | %d |\n", i+1, d.Round(time.Millisecond), l.Race.BulkLeft[i])
	}
	w("\nMedian %v, slowest %v: the urgent lane is its own queue and event source, so the\n", l.P50.Round(time.Millisecond), l.Max.Round(time.Millisecond))
	w("backlog does not delay it (in one queue it would wait behind at least %d s of bulk work: %s jobs of\n", lanesBulk/100, thousands(lanesBulk))
	w("100 ms over the worker's 10 handler slots).\n\n")
	return b.String()
}

// thousands writes n with a comma between thousands (2,000).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
