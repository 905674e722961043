package simulation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// Uploads. In a world whose store keeps objects (the S3 tier), an owner
// of its own uploads plain jobs' payloads (Service.StartUpload, a PUT per
// part, CompleteUpload) and enqueues the ready ones. Some uploads are
// bad: larger than declared, not a payload of the kind, their parts named
// wrong, or never completed. The store's calls for them (the upload's
// begin, complete, read and remove, and the staged payload's write) take
// turns and faults as every other call. The invariants, at the end:
//   - a bad upload never becomes ready, and no job exists for it;
//   - a good upload that failed failed for a fault (its attempts spent),
//     never with an upload's code;
//   - an upload that failed with an upload's code left nothing in the
//     uploads' store (unless its last attempt's clean-up failed), and a
//     ready one left no parts;
//   - a ready upload's job holds exactly the payload validated (the
//     SHA-256 the upload shows), and is tracked as every accepted job
//     (nothing lost, every job ends).
//
// In a world without the tier, StartUpload is refused and stores nothing.

const uploadOwner = "sim-uploads"

// uploadAttempts is how many runs an upload gets (jobs' own, unexported).
const uploadAttempts = 5

// uploadRun is one upload, for the checks.
type uploadRun struct {
	id, job string
	bad     string // "" for a good one: the code it must fail with
	status  string // as last read: open, validating, ready, failed
	code    string
	sha     string // a ready one's
	queued  bool   // its job was enqueued
	// completed: a CompleteUpload answered (one whose answer was lost may
	// have completed it too).
	completed bool
}

// uploads are the world's MemUploads, nil without the object tier.
func (w *world) uploadsStore() *jobstest.MemUploads {
	u, _ := w.mem.Uploads().(*jobstest.MemUploads)
	return u
}

// uploader is the uploads owner (random stream 96).
func (w *world) uploader(ctx context.Context, span time.Duration) {
	rng := rand.New(rand.NewPCG(w.seed, 96))
	a, st, q, b := w.newActor("uploader", false)
	svc, err := testroles.Service(jobs.Config{Registry: w.regOld, Store: st, Queue: q, Bus: b, Sealer: w.sealer, DispatchGrace: w.grace,
		LaneDispatchGrace: w.laneGraces(), Rand: newSimRand(w.seed, a.name), MessageFirst: w.messageFirst, Logger: w.logger})
	if err != nil {
		panic(err)
	}
	mem := w.uploadsStore()
	if mem == nil {
		octx, cancel := context.WithTimeout(ctx, apiTimeout)
		_, err := svc.StartUpload(octx, uploadOwner, kindPlain, 100)
		cancel()
		var re *jobs.RequestError
		if !errors.As(err, &re) || re.Code != "invalid_request" {
			w.violate("an upload to a store without objects: %v, want invalid_request", err)
		}
		w.cover("uploads", "refused without the object tier")
		return
	}
	var runs []*uploadRun
	for i := range 4 {
		if !sleep(ctx, time.Duration(rng.Int64N(int64(span)/8))) {
			break
		}
		p := script(rng, 96_000+i)
		body, _ := json.Marshal(p)
		declared, bad := len(body), ""
		var etags func([]string) []string
		switch rng.IntN(8) {
		case 0:
			bad, declared = "upload_too_large", len(body)-1
		case 1:
			bad, body = "upload_invalid", append(bytes.TrimSuffix(body, []byte("}")), []byte(`,"unknown":1}`)...)
			declared = len(body)
		case 2:
			bad, etags = "upload_incomplete", func([]string) []string { return []string{`"00"`} }
		case 3:
			bad = "upload_expired" // never completed
		}
		octx, cancel := context.WithTimeout(ctx, apiTimeout)
		up, err := svc.StartUpload(octx, uploadOwner, kindPlain, declared)
		cancel()
		w.cover("uploads", "start"+outcome(err))
		if err != nil {
			continue
		}
		r := &uploadRun{id: up.ID, bad: bad}
		runs = append(runs, r)
		var tags []string
		for i, part := range up.Parts {
			chunk := body[min(i*up.PartBytes, len(body)):]
			if i < len(up.Parts)-1 {
				chunk = chunk[:up.PartBytes]
			}
			e, err := mem.PutPart(part.URL, chunk)
			if err != nil {
				w.violate("upload %s: PUT part %d: %v", up.ID, part.Number, err)
			}
			tags = append(tags, e)
		}
		if bad == "upload_expired" {
			continue
		}
		if etags != nil {
			tags = etags(tags)
		}
		for try := 0; try < 5; try++ {
			octx, cancel := context.WithTimeout(ctx, apiTimeout)
			_, err = svc.CompleteUpload(octx, uploadOwner, up.ID, tags)
			cancel()
			w.cover("uploads", "complete"+outcome(err))
			if err == nil || !sleep(ctx, time.Second) {
				break
			}
		}
		r.completed = err == nil
	}
	// Follow them to their end, and enqueue the ready ones (twice: the
	// second answers the first's job).
	for until := time.Now().Add(span); time.Now().Before(until); {
		open := 0
		for _, r := range runs {
			if r.queued || r.status == "failed" {
				continue
			}
			octx, cancel := context.WithTimeout(ctx, apiTimeout)
			v, err := svc.GetUpload(octx, uploadOwner, r.id)
			cancel()
			if err != nil {
				open++
				continue
			}
			r.job, r.status, r.sha = v.JobID, v.Status, v.SHA256
			if v.Error != nil {
				r.code = *v.Error
			}
			if v.Status != "ready" {
				if v.Status != "failed" {
					open++
				}
				continue
			}
			for range 2 {
				octx, cancel := context.WithTimeout(ctx, apiTimeout)
				res, err := svc.Enqueue(octx, jobs.EnqueueRequest{Owner: uploadOwner, Kind: kindPlain, Upload: r.id})
				cancel()
				w.cover("uploads", "enqueue a ready upload"+outcome(err))
				if err == nil {
					if res.Job.ID != r.job {
						w.violate("upload %s made job %s, want its job %s", r.id, res.Job.ID, r.job)
					}
					w.accept(res.Job.ID, "uploaded")
					r.queued = true
				}
			}
			if !r.queued {
				open++
			}
		}
		if open == 0 || !sleep(ctx, 5*time.Second) {
			break
		}
	}
	w.mu.Lock()
	w.uploads = runs
	w.mu.Unlock()
}

// checkUploads checks each upload against what it was.
func (w *world) checkUploads(ctx context.Context) {
	mem := w.uploadsStore()
	for _, r := range w.uploads {
		rec, err := w.mem.Get(ctx, r.id)
		if err != nil {
			continue // its start's job was never stored
		}
		status, code := rec.Status, rec.ErrorCode
		upload := strings.HasPrefix(code, "upload_")
		// Never completed, any upload expires.
		expired := code == "upload_expired" && !r.completed
		switch {
		case r.bad != "" && status == jobs.StatusSucceeded:
			w.violate("upload %s (%s) became ready", r.id, r.bad)
		case r.bad != "" && upload && code != r.bad && !expired:
			w.violate("upload %s failed %s, want %s", r.id, code, r.bad)
		case r.bad == "" && upload && !expired:
			w.violate("a good upload %s failed %s", r.id, code)
		}
		// A refused or expired upload leaves nothing, unless its last
		// attempt's clean-up failed (the bucket's lifecycle is the
		// backstop); a ready one leaves no parts, and its object only
		// when its delete failed, which does not fail it.
		if mem != nil {
			parts, object := mem.Holds(r.id)
			switch {
			case upload && (parts || object) && rec.Attempt < uploadAttempts:
				w.violate("upload %s failed %s at attempt %d and left its upload behind", r.id, code, rec.Attempt)
			case status == jobs.StatusSucceeded && parts:
				w.violate("upload %s is ready and left its parts behind", r.id)
			}
		}
		job := r.job
		if job == "" {
			continue
		}
		jr, err := w.mem.Get(ctx, job)
		switch {
		case err != nil && r.queued:
			// Nothing lost says so.
		case err == nil && status != jobs.StatusSucceeded:
			w.violate("job %s exists for upload %s, which is %s %s", job, r.id, status, code)
		case err == nil:
			data, _, err := w.mem.ReadPart(ctx, jr, driver.PartPayload)
			sum := sha256.Sum256(data)
			if err != nil || hex.EncodeToString(sum[:]) != r.sha {
				w.violate("job %s holds a payload of SHA-256 %x (%v), not its upload's %s", job, sum, err, r.sha)
			}
			w.cover("uploads", "a ready upload's job holds its payload")
		}
	}
	if len(w.uploads) > 0 {
		w.cover("invariant", "no bad upload made a job, and a good one made one job with its payload")
	}
}
