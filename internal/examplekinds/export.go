package examplekinds

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Export is the example of work longer than one invocation: it works
// through chunks, checkpointing after each and continuing in a new
// invocation when its handler time runs short.
const Export = "example.export"

// CodeInvalidExport: chunks or chunk_ms out of range.
const CodeInvalidExport = "invalid_export"

// ExportDirEnv names a directory where example.export writes one file per
// chunk it processes (<job id>-<chunk>; a chunk processed again writes
// <job id>-<chunk>.again-<n>), so a test sees which ran twice. Unset: the
// chunks are only computed.
var ExportDirEnv = deploy.EnvExampleExportDir.Name

// ExportPayload asks for chunks chunks of chunk_ms each.
type ExportPayload struct {
	Chunks  int `json:"chunks"`
	ChunkMS int `json:"chunk_ms"`
}

// ExportState is example.export's checkpoint: the next chunk to process.
type ExportState struct {
	Next int `json:"next"`
}

// ExportProgress is its partial and final result.
type ExportProgress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// ExportLane is the lane example.export runs in: the long lane, whose
// worker has a timeout of its own (the construct's LaneLong preset; the
// local stack's LaneTimeout).
const ExportLane = "long"

// ExportOpts are example.export's options: the long lane, heartbeats every
// few seconds (a dead worker's run is found one lease later), a bound on
// the whole run, automatic continuation, and retries for interrupted runs
// (each resumes from the last checkpoint).
var ExportOpts = jobs.KindOpts{
	Lane:         ExportLane,
	FailureCodes: []string{CodeInvalidExport},
	Heartbeat:    3 * time.Second,
	MaxRunTime:   time.Hour,
	AutoContinue: true,
	Retry:        jobs.RetryPolicy{MaxAttempts: 10, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second},
}

// ExportChunks runs example.export: from the last checkpoint, each chunk
// in turn (chunk_ms of work, then its file), a checkpoint and a progress
// report after each; with less than a chunk of handler time left it ends
// the invocation with a continuation.
func ExportChunks(ctx context.Context, job *jobs.Job[ExportPayload]) (jobs.JSON[ExportProgress], error) {
	p := job.Payload
	if p.Chunks < 1 || p.Chunks > 10000 || p.ChunkMS < 1 || p.ChunkMS > 5000 {
		return jobs.JSON[ExportProgress]{}, jobs.Fail(CodeInvalidExport, nil)
	}
	chunk := time.Duration(p.ChunkMS) * time.Millisecond
	var st ExportState
	if _, err := job.Resume(&st); err != nil {
		return jobs.JSON[ExportProgress]{}, err
	}
	for st.Next < p.Chunks {
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < 2*chunk {
			return jobs.JSON[ExportProgress]{}, jobs.Continue(st)
		}
		select {
		case <-ctx.Done():
			return jobs.JSON[ExportProgress]{}, ctx.Err()
		case <-time.After(chunk):
		}
		if err := writeChunk(job.ID, st.Next); err != nil {
			return jobs.JSON[ExportProgress]{}, err
		}
		st.Next++
		if err := job.Checkpoint(ctx, st); err != nil {
			return jobs.JSON[ExportProgress]{}, err
		}
		if err := job.Publish(ctx, jobs.JSON[ExportProgress]{V: ExportProgress{Done: st.Next, Total: p.Chunks}}); err != nil {
			return jobs.JSON[ExportProgress]{}, err
		}
	}
	return jobs.JSON[ExportProgress]{V: ExportProgress{Done: st.Next, Total: p.Chunks}}, nil
}

// writeChunk writes chunk i's file in ExportDirEnv's directory, if set.
func writeChunk(id string, i int) error {
	dir := os.Getenv(ExportDirEnv)
	if dir == "" {
		return nil
	}
	name := filepath.Join(dir, id+"-"+strconv.Itoa(i))
	for n := 0; ; n++ {
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			return f.Close()
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("export chunk: %w", err)
		}
		name = filepath.Join(dir, id+"-"+strconv.Itoa(i)+".again-"+strconv.Itoa(n))
	}
}
