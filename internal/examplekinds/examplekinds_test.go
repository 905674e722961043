package examplekinds_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

func TestHashText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text   string
		rounds int
		want   string
	}{
		{"hello", 1, "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
		// sha256 of the 32 raw bytes of sha256("hello").
		{"hello", 2, "9595c9df90075148eb06860365df33584b75bff782a510c6cd4883a419833d50"},
	}
	for _, tt := range tests {
		got, err := examplekinds.HashText(context.Background(), jobstest.NewJob(examplekinds.HashPayload{Text: tt.text, Rounds: tt.rounds}, nil))
		if err != nil || got.SHA256 != tt.want {
			t.Fatalf("HashText(%q, %d) = %s, %v; want %s", tt.text, tt.rounds, got.SHA256, err, tt.want)
		}
	}
	var f *jobs.Failure
	if _, err := examplekinds.HashText(context.Background(), jobstest.NewJob(examplekinds.HashPayload{Text: "x", Rounds: 0}, nil)); !errors.As(err, &f) || f.Code != examplekinds.CodeInvalidRounds {
		t.Fatalf("rounds 0: %v", err)
	}
}

func TestHashPublishesOnLargeRuns(t *testing.T) {
	t.Parallel()
	var partials []string
	job := jobstest.NewJob(examplekinds.HashPayload{Text: "x", Rounds: 250_000}, &partials)
	if _, err := examplekinds.HashText(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	if len(partials) != 2 || partials[1] != `{"rounds_done":200000}` {
		t.Fatalf("partials %v", partials)
	}
}

func TestSleepSteps(t *testing.T) {
	t.Parallel()
	var partials []string
	job := jobstest.NewJob(examplekinds.SleepPayload{MS: 30, Steps: 3}, &partials)
	got, err := examplekinds.SleepSteps(context.Background(), job)
	if err != nil || got.Done != 3 || len(partials) != 2 || partials[0] != `{"done":1,"total":3}` {
		t.Fatalf("got %+v %v partials %v", got, err, partials)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := examplekinds.SleepSteps(ctx, jobstest.NewJob(examplekinds.SleepPayload{MS: 60000, Steps: 2}, nil)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestRegister(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	if _, err := examplekinds.Register(reg); err != nil {
		t.Fatal(err)
	}
	want := "example.approve example.chain example.event example.export example.fail example.fanout example.flaky example.hash example.hold example.hold_bulk example.hold_capped example.hold_limited example.hold_per_account example.hold_rate example.hold_urgent example.nightly example.order example.receipt example.s3_object example.sleep example.tick"
	if got := strings.Join(reg.Kinds(), " "); got != want {
		t.Fatalf("kinds %s\nwant  %s", got, want)
	}
	// The lanes the example kinds run in: the local stack and the dev
	// stack create these.
	if got := fmt.Sprint(reg.Lanes()); got != "[ bulk long urgent]" {
		t.Fatalf("lanes %s, want the default lane, bulk, long and urgent", got)
	}
	// Each kind's jobs are stored in its lane.
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]string{
		examplekinds.Export: "long", examplekinds.HoldBulk: "bulk", examplekinds.HoldUrgent: "urgent", examplekinds.Hash: "",
	} {
		payload := map[string]string{examplekinds.Export: `{"chunks":1,"chunk_ms":1}`, examplekinds.Hash: `{"text":"x","rounds":1}`}[kind]
		if payload == "" {
			payload = `{"ms":0}`
		}
		res, err := r.Service.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: kind, Payload: []byte(payload)})
		if err != nil || res.Job.Lane != want {
			t.Errorf("a job of %s: lane %q, %v; want %q", kind, res.Job.Lane, err, want)
		}
	}
	if s := reg.Schedules(); len(s) != 1 || s[0].Name != examplekinds.TickSchedule || s[0].Expression != "rate(1 minute)" || s[0].Overlap != jobs.OverlapSkip {
		t.Fatalf("schedules %+v", s)
	}
}

func TestSendReceiptMasksTheAddress(t *testing.T) {
	t.Parallel()
	r, err := examplekinds.SendReceipt(context.Background(), jobstest.NewJob(examplekinds.ReceiptPayload{OrderID: "o-1", Email: "ada@example.com"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := r.PublicJSON(); string(b) != `{"order_id":"o-1","sent_to":"a***@example.com"}` {
		t.Fatalf("public JSON %s", b)
	}
	var f *jobs.Failure
	if _, err := examplekinds.SendReceipt(context.Background(), jobstest.NewJob(examplekinds.ReceiptPayload{OrderID: "o-2"}, nil)); !errors.As(err, &f) || f.Code != examplekinds.CodeNoEmail {
		t.Fatalf("no email: %v", err)
	}
}

// example.export works through its chunks from its checkpoint, writing one
// file per chunk, and continues when too little handler time is left.
func TestExportResumesAndContinues(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(examplekinds.ExportDirEnv, dir)
	job := jobstest.NewJob(examplekinds.ExportPayload{Chunks: 5, ChunkMS: 1}, nil)
	if err := job.Checkpoint(context.Background(), examplekinds.ExportState{Next: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := examplekinds.ExportChunks(context.Background(), job)
	if err != nil || got.V.Done != 5 {
		t.Fatalf("export %+v %v, want 5 done", got, err)
	}
	files, _ := os.ReadDir(dir)
	if len(files) != 3 {
		t.Fatalf("%d chunk files, want 3 (chunks 2 to 4: the checkpoint said 2)", len(files))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := examplekinds.ExportChunks(ctx, jobstest.NewJob(examplekinds.ExportPayload{Chunks: 5, ChunkMS: 1000}, nil)); err == nil {
		t.Fatal("an export with less than a chunk of handler time left did not continue")
	}
}

// example.fanout starts one example.hash child per account, each named
// its parent's. This is how a team tests a handler that starts children:
// jobstest.Runner runs them (a rerun finding its children is
// TestAHandlerStartsChildrenOncePerName, in pkg/jobs).
func TestFanOutStartsEachChildOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := jobs.NewRegistry()
	if _, err := examplekinds.Register(reg); err != nil {
		t.Fatal(err)
	}
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "team", Kind: examplekinds.FanOut, Payload: []byte(`{"accounts":20}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	parent, err := r.Service.Get(ctx, "team", res.Job.ID)
	if err != nil || parent.Status != jobs.StatusSucceeded || string(parent.Result) != `{"started":20,"found":0}` {
		t.Fatalf("the parent: %+v %v", parent, err)
	}
	list, err := r.Service.List(ctx, "team", jobs.ListRequest{Kind: examplekinds.Hash, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != 20 {
		t.Fatalf("%d children, want 20", len(list.Jobs))
	}
	for _, c := range list.Jobs {
		if c.ChildOf != res.Job.ID || c.Status != jobs.StatusSucceeded {
			t.Errorf("child %+v", c)
		}
	}
}

// example.chain waits for one example.hash child per text, in turn, each
// fed the previous digest; a child that fails fails the chain.
func TestChainWaitsForEachChild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := jobs.NewRegistry()
	if _, err := examplekinds.Register(reg); err != nil {
		t.Fatal(err)
	}
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	run := func(payload string) *jobs.View {
		res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "team", Kind: examplekinds.Chain, Payload: []byte(payload)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Work(ctx); err != nil {
			t.Fatal(err)
		}
		v, err := r.Service.Get(ctx, "team", res.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	a := sha256.Sum256([]byte("a"))
	b := sha256.Sum256([]byte(hex.EncodeToString(a[:]) + "b"))
	v := run(`{"texts":["a","b"],"rounds":1}`)
	want := `{"digests":["` + hex.EncodeToString(a[:]) + `","` + hex.EncodeToString(b[:]) + `"]}`
	if v.Status != jobs.StatusSucceeded || string(v.Result) != want {
		t.Fatalf("the chain: %s %s, want %s", v.Status, v.Result, want)
	}
	if v := run(`{"texts":["a"],"rounds":0}`); v.Status != jobs.StatusFailed || v.Error == nil || *v.Error != examplekinds.CodeChainBroken {
		t.Fatalf("a chain whose child fails: %s %v", v.Status, v.Error)
	}
}
