package jobs_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type docPayload struct {
	Text  string `json:"text"`
	Token string `json:"token" jobs:"secret"`
}

type docResult struct {
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
	Token  bool   `json:"token"`
}

// uploadRig runs a "doc" kind that takes payloads up to 20 MiB in a
// Runner that keeps objects, and so takes uploads.
func uploadRig(t *testing.T) *jobstest.Runner {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "doc", func(_ context.Context, job *jobs.Job[docPayload]) (jobs.JSON[docResult], error) {
		sum := sha256.Sum256([]byte(job.Payload.Text))
		return jobs.JSON[docResult]{V: docResult{Bytes: len(job.Payload.Text), SHA256: hex.EncodeToString(sum[:]), Token: job.Payload.Token == "tok-1"}}, nil
	}, &jobs.KindOpts{MaxPayloadBytes: 20 << 20})
	r, err := jobstest.NewRunnerWith(reg, jobstest.RunnerOpts{ObjectsOver: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// upload starts an upload of body for owner, PUTs its parts, and returns
// it with the ETags the PUTs answered.
func upload(t *testing.T, r *jobstest.Runner, owner string, declared int, body []byte) (*jobs.Upload, []string) {
	t.Helper()
	up, err := r.Service.StartUpload(context.Background(), owner, "doc", declared)
	if err != nil {
		t.Fatal(err)
	}
	var etags []string
	for i, p := range up.Parts {
		chunk := body[min(i*up.PartBytes, len(body)):min((i+1)*up.PartBytes, len(body))]
		if i == len(up.Parts)-1 {
			chunk = body[min(i*up.PartBytes, len(body)):]
		}
		e, err := r.Uploads.PutPart(p.URL, chunk)
		if err != nil {
			t.Fatal(err)
		}
		etags = append(etags, e)
	}
	return up, etags
}

func work(t *testing.T, r *jobstest.Runner) {
	t.Helper()
	if _, err := r.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestAnUploadBecomesAJob: a payload of two parts, uploaded, completed and
// validated by a worker, is enqueued without being read again: the job's
// id is the upload's JobID, its handler gets the payload whole with its
// secret, the upload leaves nothing behind, and enqueueing it again
// answers the same job.
func TestAnUploadBecomesAJob(t *testing.T) {
	r := uploadRig(t)
	ctx := context.Background()
	text := strings.Repeat("0123456789abcdef", ((8<<20)+100)/16)
	body, _ := json.Marshal(docPayload{Text: text, Token: "tok-1"})
	up, etags := upload(t, r, "o", len(body), body)
	if len(up.Parts) != 2 || up.PartBytes != (8<<20) || !up.ExpiresAt.After(r.Clock.Now()) {
		t.Fatalf("upload of %d bytes: %d parts of %d, expires %v", len(body), len(up.Parts), up.PartBytes, up.ExpiresAt)
	}
	if v, err := r.Service.GetUpload(ctx, "o", up.ID); err != nil || v.Status != "open" {
		t.Fatalf("before its completion: %+v, %v; want open", v, err)
	}
	if _, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: up.ID}); !isCode(err, "upload_not_ready") {
		t.Fatalf("an open upload enqueued: %v, want upload_not_ready", err)
	}
	v, err := r.Service.CompleteUpload(ctx, "o", up.ID, etags)
	if err != nil || v.Status != "validating" {
		t.Fatalf("complete: %+v, %v; want validating", v, err)
	}
	work(t, r)
	v, err = r.Service.GetUpload(ctx, "o", up.ID)
	sum := sha256.Sum256(body)
	if err != nil || v.Status != "ready" || v.Error != nil || v.UsableUntil == nil || v.Bytes != len(body) {
		t.Fatalf("validated: %+v, %v; want ready", v, err)
	}
	if v.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("ready with digest %s, want its payload's %x", v.SHA256, sum)
	}
	if n := r.Uploads.Left(); n != 0 {
		t.Fatalf("%d uploads left once validated, want none", n)
	}
	res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: up.ID})
	if err != nil || res.Job.ID != v.JobID || res.Replayed {
		t.Fatalf("enqueue the upload: %+v, %v; want job %s", res, err, v.JobID)
	}
	if res.Job.PayloadBytes < len(body) || (res.Job.Payload != nil && string(res.Job.Payload) != "null") {
		t.Fatalf("the job shows %d payload bytes, %s; want its object's size alone", res.Job.PayloadBytes, res.Job.Payload)
	}
	work(t, r)
	got, err := r.Service.Get(ctx, "o", res.Job.ID)
	var out docResult
	if err != nil || got.Status != jobs.StatusSucceeded || json.Unmarshal(got.Result, &out) != nil {
		t.Fatalf("the upload's job: %+v, %v", got, err)
	}
	want := sha256.Sum256([]byte(text))
	if out.Bytes != len(text) || out.SHA256 != hex.EncodeToString(want[:]) || !out.Token {
		t.Fatalf("the handler got %+v, want %d bytes (%x) and its secret", out, len(text), want)
	}
	again, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: up.ID})
	if err != nil || !again.Replayed || again.Job.ID != res.Job.ID {
		t.Fatalf("the upload enqueued again: %+v, %v; want the same job, replayed", again, err)
	}
	if _, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: up.ID, EnqueueOpts: jobs.EnqueueOpts{Delay: time.Hour}}); !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Fatalf("the upload enqueued again with other options: %v, want an idempotency conflict", err)
	}
}

// TestUploadsRefused: each bad upload is refused with its own code, no job
// of its kind exists, and nothing is left of it.
func TestUploadsRefused(t *testing.T) {
	r := uploadRig(t)
	ctx := context.Background()
	good, _ := json.Marshal(docPayload{Text: "hello"})

	for _, tc := range []struct {
		kind  string
		bytes int
		code  string
	}{{"nope", 10, "unknown_kind"}, {"doc", 0, "invalid_request"}, {"doc", -1, "invalid_request"}} {
		if _, err := r.Service.StartUpload(ctx, "o", tc.kind, tc.bytes); !isCode(err, tc.code) {
			t.Errorf("StartUpload(%q, %d): %v, want %s", tc.kind, tc.bytes, err, tc.code)
		}
	}
	var pe *jobs.PayloadError
	if _, err := r.Service.StartUpload(ctx, "o", "doc", 20<<20+1); !errors.As(err, &pe) || pe.Limit != 20<<20 {
		t.Errorf("an upload past the kind's bound: %v, want a PayloadError at its limit", err)
	}
	if n := r.Uploads.Left(); n != 0 {
		t.Fatalf("refused starts left %d uploads", n)
	}

	for _, tc := range []struct {
		name     string
		declared int
		body     []byte
		etags    func([]string) []string
		code     string
	}{
		{"larger than declared", len(good) - 1, good, nil, "upload_too_large"},
		{"not a payload of its kind", 20, []byte(`{"text":5}`), nil, "upload_invalid"},
		{"an unknown field", 40, []byte(`{"text":"a","extra":1}`), nil, "upload_invalid"},
		{"not JSON", 20, []byte(`{"text":`), nil, "upload_invalid"},
		{"parts named wrong", len(good), good, func([]string) []string { return []string{`"0000"`} }, "upload_incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, etags := upload(t, r, "o", tc.declared, tc.body)
			if tc.etags != nil {
				etags = tc.etags(etags)
			}
			if _, err := r.Service.CompleteUpload(ctx, "o", up.ID, etags); err != nil {
				t.Fatal(err)
			}
			work(t, r)
			v, err := r.Service.GetUpload(ctx, "o", up.ID)
			if err != nil || v.Status != "failed" || v.Error == nil || *v.Error != tc.code {
				t.Fatalf("%+v, %v; want failed %s", v, err, tc.code)
			}
			if n := r.Uploads.Left(); n != 0 {
				t.Fatalf("%d uploads left, want none", n)
			}
			_, err = r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: up.ID})
			if !isCode(err, "upload_failed") {
				t.Fatalf("enqueue of a failed upload: %v, want upload_failed", err)
			}
			if _, err := r.Service.Get(ctx, "o", v.JobID); !errors.Is(err, jobs.ErrNotFound) {
				t.Fatalf("a job exists for a failed upload: %v", err)
			}
		})
	}

	// Another caller's upload, a ready upload of another kind's request, a
	// payload and an upload both, an idempotency key, and too few ETags.
	up, etags := upload(t, r, "o", len(good), good)
	if _, err := r.Service.CompleteUpload(ctx, "o", up.ID, etags[:0]); !isCode(err, "invalid_request") {
		t.Errorf("complete naming no part: %v, want invalid_request", err)
	}
	if _, err := r.Service.CompleteUpload(ctx, "p", up.ID, etags); !isCode(err, "unknown_upload") {
		t.Errorf("another caller completes it: %v, want unknown_upload", err)
	}
	if _, err := r.Service.CompleteUpload(ctx, "o", up.ID, etags); err != nil {
		t.Fatal(err)
	}
	work(t, r)
	for _, tc := range []struct {
		req  jobs.EnqueueRequest
		code string
	}{
		{jobs.EnqueueRequest{Owner: "p", Kind: "doc", Upload: up.ID}, "unknown_upload"},
		{jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: "01JBOGUSBOGUSBOGUSBOGUSBOG"}, "unknown_upload"},
		{jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: up.ID, Payload: good}, "invalid_request"},
		{jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: up.ID, EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k"}}, "invalid_request"},
	} {
		if _, err := r.Service.Enqueue(ctx, tc.req); !isCode(err, tc.code) {
			t.Errorf("enqueue %+v: %v, want %s", tc.req, err, tc.code)
		}
	}
	if _, err := r.Service.GetUpload(ctx, "p", up.ID); !isCode(err, "unknown_upload") {
		t.Errorf("another caller reads it: %v, want unknown_upload", err)
	}
	if _, err := r.Service.Prepare(jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: up.ID}); !isCode(err, "invalid_request") {
		t.Errorf("a transactional enqueue of an upload: %v, want invalid_request", err)
	}

	// A day after its start, a ready upload is no longer taken.
	r.Clock.Advance(25 * time.Hour)
	if _, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "doc", Upload: up.ID}); !isCode(err, "upload_expired") {
		t.Errorf("a ready upload enqueued after its day: %v, want upload_expired", err)
	}
}

// TestAnUploadNeverCompletedExpires: an upload not completed within its
// window fails upload_expired, and its parts are aborted.
func TestAnUploadNeverCompletedExpires(t *testing.T) {
	r := uploadRig(t)
	ctx := context.Background()
	up, etags := upload(t, r, "o", 5, []byte(`"abc"`))
	work(t, r)
	if v, _ := r.Service.GetUpload(ctx, "o", up.ID); v.Status != "open" {
		t.Fatalf("an upload waiting for its completion: %+v", v)
	}
	r.Clock.Advance(21 * time.Minute)
	work(t, r)
	v, err := r.Service.GetUpload(ctx, "o", up.ID)
	if err != nil || v.Status != "failed" || v.Error == nil || *v.Error != "upload_expired" {
		t.Fatalf("past its window: %+v, %v; want failed upload_expired", v, err)
	}
	if n := r.Uploads.Left(); n != 0 {
		t.Fatalf("%d uploads left, want none", n)
	}
	if v, err := r.Service.CompleteUpload(ctx, "o", up.ID, etags); err != nil || v.Status != "failed" {
		t.Fatalf("a late complete: %+v, %v; want the upload as it is, failed", v, err)
	}
}

// TestAnUploadCompletedLateIsRefused: a completion after the upload's
// window is refused upload_expired, even before the worker has ended it,
// and the upload then expires.
func TestAnUploadCompletedLateIsRefused(t *testing.T) {
	r := uploadRig(t)
	ctx := context.Background()
	up, etags := upload(t, r, "o", 5, []byte(`"abc"`))
	r.Clock.Advance(20*time.Minute + time.Second)
	if _, err := r.Service.CompleteUpload(ctx, "o", up.ID, etags); !isCode(err, "upload_expired") {
		t.Fatalf("a complete after the window: %v, want upload_expired", err)
	}
	work(t, r) // its first run waits a second more for its completion
	r.Clock.Advance(2 * time.Second)
	work(t, r)
	if v, err := r.Service.GetUpload(ctx, "o", up.ID); err != nil || v.Error == nil || *v.Error != "upload_expired" {
		t.Fatalf("after its window: %+v, %v", v, err)
	}
	if n := r.Uploads.Left(); n != 0 {
		t.Fatalf("%d uploads left, want none", n)
	}
}

// isCode reports whether err is a refusal of code.
func isCode(err error, code string) bool {
	var re *jobs.RequestError
	return errors.As(err, &re) && re.Code == code
}
