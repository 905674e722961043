// Package examplekinds holds the job kinds the system registers out of the
// box, so a fresh deployment or `make run` does something real and tests
// can drive it:
//
//   - example.hash: iterated SHA-256 of a text, with progress;
//   - example.sleep: sleeps in steps, publishing each step, honouring its
//     context;
//   - example.fail: fails in the ways a handler can (declared code, error
//     text with a secret, panic, ignoring its deadline), to show that none
//     of it leaks;
//   - example.flaky: fails its first attempts with a retryable error;
//   - example.receipt: the job of the transactional-enqueue example;
//   - example.s3_object and example.event: fed by S3 notifications and
//     EventBridge events dropped on the queue (see Routes);
//   - example.tick: enqueued every minute by the schedule example.tick.
package examplekinds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Kind names.
const (
	Hash  = "example.hash"
	Sleep = "example.sleep"
	Fail  = "example.fail"
)

// HashPayload is example.hash's payload.
type HashPayload struct {
	Text   string `json:"text"`
	Rounds int    `json:"rounds"`
}

// HashResult is example.hash's result: the final digest, hex-encoded.
type HashResult struct {
	SHA256 string `json:"sha256"`
}

// PublicJSON returns {"sha256": "..."}.
func (r HashResult) PublicJSON() ([]byte, error) { return []byte(`{"sha256":"` + r.SHA256 + `"}`), nil }

// HashProgress is example.hash's partial result.
type HashProgress struct {
	RoundsDone int `json:"rounds_done"`
}

// PublicJSON returns {"rounds_done": n}.
func (p HashProgress) PublicJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"rounds_done":%d}`, p.RoundsDone), nil
}

// Declared failure codes.
const (
	CodeInvalidRounds = "invalid_rounds"
	CodeInvalidSleep  = "invalid_sleep"
	CodeExampleFailed = "example_failed"
	CodeInvalidMode   = "invalid_mode"
)

// hashPublishEvery is how many rounds pass between partial results: a
// publish costs one write, so only large runs publish.
const hashPublishEvery = 100_000

// HashText runs example.hash: round 1 hashes the UTF-8 bytes of text, each
// later round hashes the previous 32-byte digest.
func HashText(ctx context.Context, job *jobs.Job[HashPayload]) (HashResult, error) {
	p := job.Payload
	if p.Rounds < 1 || p.Rounds > 1_000_000 {
		return HashResult{}, jobs.Fail(CodeInvalidRounds, fmt.Errorf("rounds %d out of 1..1000000", p.Rounds))
	}
	sum := sha256.Sum256([]byte(p.Text))
	for i := 2; i <= p.Rounds; i++ {
		sum = sha256.Sum256(sum[:])
		if i%hashPublishEvery == 0 {
			if err := ctx.Err(); err != nil {
				return HashResult{}, err
			}
			if err := job.Publish(ctx, HashProgress{RoundsDone: i}); err != nil {
				return HashResult{}, err
			}
		}
	}
	return HashResult{SHA256: hex.EncodeToString(sum[:])}, nil
}

// SleepPayload is example.sleep's payload.
type SleepPayload struct {
	MS    int `json:"ms"`
	Steps int `json:"steps"`
}

// SleepProgress is example.sleep's partial and final result.
type SleepProgress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// PublicJSON returns {"done": i, "total": steps}.
func (p SleepProgress) PublicJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"done":%d,"total":%d}`, p.Done, p.Total), nil
}

// SleepSteps runs example.sleep: ms in total over steps steps, publishing
// after each; it stops when its context ends.
func SleepSteps(ctx context.Context, job *jobs.Job[SleepPayload]) (SleepProgress, error) {
	p := job.Payload
	if p.MS < 0 || p.MS > 15*60*1000 || p.Steps < 1 || p.Steps > 1000 {
		return SleepProgress{}, jobs.Fail(CodeInvalidSleep, fmt.Errorf("ms %d steps %d", p.MS, p.Steps))
	}
	step := time.Duration(p.MS) * time.Millisecond / time.Duration(p.Steps)
	timer := time.NewTimer(step)
	defer timer.Stop()
	for i := 1; i <= p.Steps; i++ {
		select {
		case <-ctx.Done():
			return SleepProgress{}, ctx.Err()
		case <-timer.C:
		}
		timer.Reset(step)
		if i < p.Steps {
			if err := job.Publish(ctx, SleepProgress{Done: i, Total: p.Steps}); err != nil {
				return SleepProgress{}, err
			}
		}
	}
	return SleepProgress{Done: p.Steps, Total: p.Steps}, nil
}

// FailPayload is example.fail's payload. Secret is sealed at rest (see
// jobs.Sealer), so it appears in no stored item either.
type FailPayload struct {
	Mode   string `json:"mode"`
	Secret string `json:"secret" jobs:"secret"`
}

// FailModes runs example.fail. Every mode puts Secret in what it returns or
// panics with, and none of it may appear in the store, the API or the logs:
//
//	declared         fails with the declared code example_failed
//	internal         returns an error whose text contains the secret
//	panic            panics with the secret
//	ignore_deadline  sleeps past its deadline, ignoring its context
func FailModes(ctx context.Context, job *jobs.Job[FailPayload]) (jobs.NoResult, error) {
	p := job.Payload
	switch p.Mode {
	case "declared":
		return jobs.NoResult{}, jobs.Fail(CodeExampleFailed, fmt.Errorf("upstream refused token %s", p.Secret))
	case "internal":
		return jobs.NoResult{}, fmt.Errorf("POST https://user:%s@upstream.invalid/: 502 Bad Gateway", p.Secret)
	case "panic":
		panic("example.fail panics with " + p.Secret)
	case "ignore_deadline":
		dl, ok := ctx.Deadline()
		if !ok {
			dl = time.Now().Add(time.Minute)
		}
		time.Sleep(time.Until(dl) + 30*time.Second) // deliberately ignores ctx
		return jobs.NoResult{}, errors.New("woke up late holding " + p.Secret)
	}
	return jobs.NoResult{}, jobs.Fail(CodeInvalidMode, nil)
}

// Switch is the environment variable that turns the example kinds on in
// this repository's own functions. This repository's CDK app sets it
// (through the construct's Config.Environment) only when asked: dev by
// default, prod only with -c exampleKinds=true; the local stack always
// does. Without it the
// functions serve no kind at all, so example.fail (which panics or overruns
// on purpose) never reaches a deployment by accident.
var Switch = deploy.EnvExampleKinds.Name

// Enabled reports whether getenv turns the example kinds on.
func Enabled(getenv func(string) string) bool { return getenv(Switch) == "on" }

// MustRegistry returns the registry of this repository's functions: the
// example kinds when they are enabled (example.blob too, whose large parts
// need the object tier), else an empty one. It panics only on
// a registration bug, which every test run would show.
func MustRegistry(getenv func(string) string) *jobs.Registry {
	reg := jobs.NewRegistry()
	if Enabled(getenv) {
		if _, err := Register(reg); err != nil {
			panic(err)
		}
		if err := RegisterBlob(reg); err != nil {
			panic(err)
		}
	}
	return reg
}

// Kinds are the typed handles of the example kinds that callers enqueue
// from Go.
type Kinds struct {
	Hash    jobs.Kind[HashPayload]
	Sleep   jobs.Kind[SleepPayload]
	Receipt jobs.Kind[ReceiptPayload]
}

// Register adds the example kinds to reg and returns the handles of those
// enqueued from Go.
func Register(reg *jobs.Registry) (Kinds, error) {
	var k Kinds
	var errs [15]error
	k.Hash, errs[0] = jobs.Register(reg, Hash, HashText, &jobs.KindOpts{FailureCodes: []string{CodeInvalidRounds}})
	k.Sleep, errs[1] = jobs.Register(reg, Sleep, SleepSteps, &jobs.KindOpts{FailureCodes: []string{CodeInvalidSleep}})
	_, errs[2] = jobs.Register(reg, Fail, FailModes, &jobs.KindOpts{FailureCodes: []string{CodeExampleFailed, CodeInvalidMode}})
	_, errs[3] = jobs.Register(reg, Flaky, FlakyRun, &jobs.KindOpts{FailureCodes: []string{CodeStillFailing}, Retry: FlakyPolicy})
	k.Receipt, errs[4] = jobs.Register(reg, Receipt, SendReceipt, &jobs.KindOpts{FailureCodes: []string{CodeNoEmail}})
	_, errs[5] = jobs.Register(reg, S3Object, DescribeObject, nil)
	_, errs[6] = jobs.Register(reg, Event, DescribeEvent, nil)
	_, errs[8] = jobs.Register(reg, Export, ExportChunks, &ExportOpts)
	errs[9] = registerHolds(reg)
	if errs[0] == nil {
		_, errs[10] = jobs.Register(reg, FanOut, fanOut(k.Hash), &jobs.KindOpts{FailureCodes: []string{CodeInvalidFanOut}, Retry: FlakyPolicy})
		_, errs[13] = jobs.Register(reg, Chain, chain(k.Hash), &jobs.KindOpts{FailureCodes: []string{CodeChainBroken}})
		_, errs[14] = jobs.Register(reg, Nightly, nightly(k.Hash), &jobs.KindOpts{FailureCodes: []string{CodeInvalidNightly}})
	}
	if errs[6] == nil {
		errs[7] = registerTick(reg)
	}
	_, errs[11] = jobs.Register(reg, Approve, RunApprove, &ApproveOpts)
	_, errs[12] = jobs.Register(reg, Order, RunOrder, &OrderOpts)
	return k, errors.Join(errs[:]...)
}
