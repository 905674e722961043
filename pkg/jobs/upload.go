package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Uploads carry payloads larger than a request (POST /v1/jobs takes 2
// MiB) from a caller to a job, through the store's object tier
// (driver.UploadKeeper: S3 in a deployment with a bucket):
//
//  1. StartUpload begins a multipart upload of a declared size for a kind,
//     under uploads/<owner hash>/<upload id>/, and answers a presigned URL
//     per part of uploadPartBytes, each valid for 15 minutes. It stores
//     the upload as a job of the internal kind lambdajobs.upload, which
//     waits for the upload's completion as a signal.
//  2. The caller PUTs each part to its URL, then CompleteUpload names the
//     parts by the ETags the PUTs answered: the signal.
//  3. A worker of the kind's lane (memory sized for the kind's payloads,
//     not the API function's) joins the
//     parts, reads the object, refuses it past its declared size, decodes
//     it strictly into the kind's payload type, seals its secret fields for
//     the job it will be, writes that as the job's payload object, and
//     deletes the upload. The upload is then ready; an upload that fails
//     leaves nothing in the bucket, and its failure code says why.
//  4. Enqueue with EnqueueRequest.Upload creates the job from a ready
//     upload of the same owner and kind, without reading its payload: its
//     id is derived from the upload's (so an upload makes one job, and
//     enqueueing it again answers that job), and its request hash covers
//     the payload's SHA-256.
//
// docs/reference/HTTP.md, "Uploads", has the routes; docs/operations/SECURITY.md what a link
// allows.

// uploadKind is the internal kind whose jobs hold uploads.
const uploadKind = "lambdajobs.upload"

// uploadPartBytes is the size of each part of an upload but the last
// (Upload.PartBytes).
const uploadPartBytes = 8 << 20

const (
	// uploadLinks is how long each part's URL lasts.
	uploadLinks = 15 * time.Minute
	// uploadWindow is how long after its start an upload may be
	// completed: its links' time and five minutes for the last PUT.
	uploadWindow = uploadLinks + 5*time.Minute
	// uploadKeep is how long after its start a ready upload may be
	// enqueued.
	uploadKeep = 24 * time.Hour
	// uploadSignal is the signal that completes an upload.
	uploadSignal = "complete"
)

// The failure codes of an upload (UploadView.Error).
const (
	codeUploadExpired    = "upload_expired"    // not completed within its window
	codeUploadIncomplete = "upload_incomplete" // the parts named are not those uploaded
	codeUploadTooLarge   = "upload_too_large"  // more bytes than declared, or than the store keeps once sealed
	codeUploadInvalid    = "upload_invalid"    // not a payload of its kind (strict decoding)
)

// The refusals of requests about uploads.
const (
	codeUnknownUpload  = "unknown_upload"
	codeUploadNotReady = "upload_not_ready"
	codeUploadFailed   = "upload_failed"
	codeUploadGone     = "upload_expired"
)

// uploadSpec is an upload job's payload: what was declared and begun.
type uploadSpec struct {
	Kind  string `json:"kind"`
	Bytes int    `json:"bytes"`
	// Upload is the store's id of the multipart upload.
	Upload string `json:"upload"`
	// Expires is when the upload must have been completed.
	Expires time.Time `json:"expires_at"`
}

// uploadDone is the completing signal's payload.
type uploadDone struct {
	ETags []string `json:"etags"`
}

// uploadInfo is a ready upload: an upload job's result.
type uploadInfo struct {
	Kind   string `json:"kind"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
	// Ref and Stored name the payload staged for the job (driver.Staged).
	Ref    string    `json:"ref"`
	Stored int       `json:"stored_bytes"`
	Until  time.Time `json:"usable_until"`
	// Refused is the code of an upload refused (validate's step stores
	// it, so a run after a failed clean-up fails with the same code).
	Refused string `json:"refused,omitempty"`
}

// PublicJSON is the upload's description.
func (u uploadInfo) PublicJSON() ([]byte, error) { return json.Marshal(u) }

// Upload is an upload begun (Service.StartUpload): PUT part i's bytes
// (uploadPartBytes each, the last the rest) to Parts[i].URL before
// ExpiresAt, then complete it with the ETag header each PUT answered.
type Upload struct {
	ID        string       `json:"id"`
	Kind      string       `json:"kind"`
	Bytes     int          `json:"bytes"`
	PartBytes int          `json:"part_bytes"`
	Parts     []UploadPart `json:"parts"`
	ExpiresAt time.Time    `json:"expires_at"`
}

// UploadPart is the URL that uploads one part of an upload.
type UploadPart struct {
	Number int    `json:"number"`
	URL    string `json:"url"`
}

// UploadView is an upload as its owner sees it (GET /v1/uploads/{id}).
type UploadView struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Bytes int    `json:"bytes"`
	// Status is "open" (waiting for its parts and its completion),
	// "validating", "ready" (enqueue it) or "failed" (Error says why:
	// upload_expired, upload_incomplete, upload_too_large,
	// upload_invalid).
	Status string  `json:"status"`
	Error  *string `json:"error,omitempty"`
	// SHA256 is the ready payload's, canonical JSON before sealing.
	SHA256 string `json:"sha256,omitempty"`
	// ExpiresAt is when an open upload stops taking parts and its
	// completion; UsableUntil when a ready one can last be enqueued.
	ExpiresAt   time.Time  `json:"expires_at"`
	UsableUntil *time.Time `json:"usable_until,omitempty"`
	// JobID is the job that enqueueing the upload makes.
	JobID     string    `json:"job_id"`
	CreatedAt time.Time `json:"created_at"`
}

// uploadKey is where the owner's upload id rests until it is validated.
func uploadKey(owner, id string) string {
	return "uploads/" + wire.OwnerKey(owner)[:16] + "/" + id + "/payload"
}

// uploadJobID is the id of the job an upload makes: its payload is
// sealed for it before the job exists.
func uploadJobID(owner, upload string) string { return wire.DerivedID("upload", owner, upload) }

// addUploads registers the upload kind in reg, once; a kind of that name
// registered by other code is an error.
func (reg *Registry) addUploads() error {
	def, err := newKindDef(uploadKind, runUpload, &KindOpts{
		Internal:     true,
		FailureCodes: []string{codeUploadExpired, codeUploadIncomplete, codeUploadTooLarge, codeUploadInvalid},
		Signals:      map[string]any{uploadSignal: uploadDone{}},
		Retry:        RetryPolicy{MaxAttempts: uploadAttempts, BaseDelay: 2 * time.Second},
	})
	if err != nil {
		return err
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if cur, ok := reg.kinds[uploadKind]; ok {
		if cur.payloadType != reflect.TypeFor[uploadSpec]() {
			return fmt.Errorf("jobs: kind %q is the uploads' (a store with uploads: driver.UploadKeeper); register none of that name", uploadKind)
		}
		return nil
	}
	reg.kinds[uploadKind] = def
	return nil
}

// uploadEnv is what an upload's run needs of the worker's client.
type uploadEnv struct {
	uploads driver.Uploads
	stager  driver.PayloadStager
	reg     *Registry
	sealer  Sealer
	maxPart int
}

// uploadsOf is store's uploads and payload stager, when it has both.
func uploadsOf(store driver.Store) (driver.Uploads, driver.PayloadStager) {
	k, ok := store.(driver.UploadKeeper)
	st, staged := store.(driver.PayloadStager)
	if !ok || !staged {
		return nil, nil
	}
	u := k.Uploads()
	if u == nil || isNil(u) {
		return nil, nil
	}
	return u, st
}

// uploadAttempts is how many runs an upload gets: a fault of S3 or of
// the store in one (a Retry, a timeout, a crash) is tried again.
const uploadAttempts = 5

// runUpload is the upload kind's handler: it waits for the completion,
// validates the upload into the job's payload, and deletes it. Its last
// attempt, failing, removes what the upload left in the bucket (the
// bucket's lifecycle does, within a day, when even that fails).
func runUpload(ctx context.Context, job *Job[uploadSpec]) (uploadInfo, error) {
	h := job.handle()
	env := h.uploads
	if env == nil {
		return uploadInfo{}, errors.New("jobs: this worker's store takes no uploads")
	}
	spec := job.Payload
	key := uploadKey(job.Owner, job.ID)
	// WaitForSignal and Step may end the run's goroutine (runtime.Goexit):
	// the clean-up is called, not deferred.
	done, came, err := WaitForSignal[uploadDone](ctx, job, uploadSignal, max(spec.Expires.Sub(h.clock()), time.Second))
	if err != nil {
		return uploadInfo{}, env.lastAttempt(ctx, job, key, err)
	}
	if !came {
		return uploadInfo{}, env.refuse(ctx, job, key, codeUploadExpired)
	}
	info, err := Step(ctx, job, "validate", func(ctx context.Context) (uploadInfo, error) {
		return env.validate(ctx, uploadCall{owner: job.Owner, id: job.ID, key: key, spec: spec, etags: done.ETags})
	})
	if err != nil {
		return uploadInfo{}, env.lastAttempt(ctx, job, key, err)
	}
	if info.Refused != "" {
		return uploadInfo{}, env.refuse(ctx, job, key, info.Refused)
	}
	// Validated: the upload's object is a day's storage at most if this
	// delete fails (the bucket's lifecycle), not a reason to fail.
	_ = env.uploads.Remove(ctx, key)
	return info, nil
}

// refuse fails the upload with code once it cleared what the upload left
// in the bucket; a clean-up that fails is tried again in the next
// attempt, and on the last the lifecycle finishes it.
func (env *uploadEnv) refuse(ctx context.Context, job *Job[uploadSpec], key, code string) error {
	if err := env.clear(ctx, key, job.Payload.Upload); err != nil && job.Attempt < uploadAttempts {
		return Retry(err)
	}
	return Fail(code, nil)
}

// clear aborts upload id at key and deletes its object, if it has one.
func (env *uploadEnv) clear(ctx context.Context, key, id string) error {
	if err := env.uploads.Abort(ctx, key, id); err != nil {
		return err
	}
	return env.uploads.Remove(ctx, key)
}

// lastAttempt returns err, after clearing what the upload left when err
// ends the job: a failure, or any error on its last attempt.
func (env *uploadEnv) lastAttempt(ctx context.Context, job *Job[uploadSpec], key string, err error) error {
	var f *Failure
	if errors.As(err, &f) || job.Attempt < uploadAttempts {
		return err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = env.clear(cctx, key, job.Payload.Upload)
	return err
}

// uploadCall is one upload as its validation sees it: the owner's upload
// id at key, declared as spec, completed with etags.
type uploadCall struct {
	owner, id, key string
	spec           uploadSpec
	etags          []string
}

// validate completes the upload, reads it, and stages it as the payload
// of its job; or it says why the upload is refused (uploadInfo.Refused),
// which its step stores before anything is cleared.
func (env *uploadEnv) validate(ctx context.Context, u uploadCall) (uploadInfo, error) {
	owner, id, key, spec, etags := u.owner, u.id, u.key, u.spec, u.etags
	refused := func(code string) (uploadInfo, error) { return uploadInfo{Refused: code}, nil }
	// A complete that landed in an earlier attempt answers ErrUploadParts
	// now: the read tells.
	if err := env.uploads.Complete(ctx, key, spec.Upload, etags); err != nil && !errors.Is(err, driver.ErrUploadParts) {
		return uploadInfo{}, Retry(err)
	}
	raw, err := env.uploads.Read(ctx, key, spec.Bytes)
	switch {
	case errors.Is(err, driver.ErrPartMissing):
		return refused(codeUploadIncomplete)
	case errors.Is(err, driver.ErrUploadTooLarge):
		return refused(codeUploadTooLarge)
	case err != nil:
		return uploadInfo{}, Retry(err)
	}
	k, ok := env.reg.lookupFor(spec.Kind, true)
	if !ok || k.validate(raw) != nil {
		return refused(codeUploadInvalid)
	}
	canonical, err := k.canonical(raw)
	if err != nil {
		return refused(codeUploadInvalid)
	}
	jobID := uploadJobID(owner, id)
	sealed, err := sealPayload(env.sealer, jobID, k.secrets, canonical)
	if err != nil {
		return uploadInfo{}, fmt.Errorf("jobs: seal the upload: %w", err)
	}
	if env.maxPart > 0 && len(sealed) > env.maxPart {
		return refused(codeUploadTooLarge)
	}
	until := spec.Expires.Add(uploadKeep)
	st, err := env.stager.StagePayload(ctx, jobID, sealed, until.Add(payloadSlack))
	if err != nil {
		return uploadInfo{}, Retry(err)
	}
	sum := sha256.Sum256(canonical)
	return uploadInfo{Kind: spec.Kind, Bytes: len(raw), SHA256: hex.EncodeToString(sum[:]), Ref: st.Ref, Stored: st.Bytes, Until: until}, nil
}

// partSizes are the sizes of the parts of an upload of n bytes.
func partSizes(n int) []int {
	var sizes []int
	for ; n > uploadPartBytes; n -= uploadPartBytes {
		sizes = append(sizes, uploadPartBytes)
	}
	return append(sizes, n)
}

// errUploadJob refuses an API caller's action on an upload's job through
// the job routes: it is completed through its own route, and one never
// completed ends at its expires_at, its parts deleted.
var errUploadJob = refuse(codeInvalidRequest, "that job is an upload's: complete it through /v1/uploads/{id}/complete; one never completed ends at its expires_at")

// callerActs refuses an API caller's cancel, retry or signal of an
// upload's job (errUploadJob): a cancel would leave its parts in the
// bucket, and a retry or a signal would pass what CompleteUpload checks.
func (s *Service) callerActs(rec *driver.Record) error {
	if s.callers && rec.Kind == uploadKind {
		return errUploadJob
	}
	return nil
}

// uploadReady is a ready upload's payload, as Enqueue takes it.
type uploadReady struct {
	staged driver.Staged
	sha256 string
}

// StartUpload begins an upload of bytes for a job of kind, for owner. A
// kind the caller cannot enqueue, a size past the kind's MaxPayloadBytes,
// and a deployment whose store takes no uploads are refused, and nothing
// is stored.
func (s *Service) StartUpload(ctx context.Context, owner, kind string, bytes int) (*Upload, error) {
	if s.uploads == nil {
		return nil, refuse(codeInvalidRequest, "this deployment takes no uploads: its store keeps no payloads as objects")
	}
	if err := checkOwner(owner); err != nil {
		return nil, err
	}
	k, ok := s.reg.lookupFor(kind, s.callers)
	if !ok {
		return nil, errUnknownKind
	}
	switch {
	case bytes < 1:
		return nil, refuse(codeInvalidRequest, `"bytes": the payload's size, 1 or more`)
	case bytes > k.maxPayload:
		return nil, &PayloadError{Reason: fmt.Sprintf("%d bytes", bytes), Limit: k.maxPayload}
	}
	// The caller's rate first: a refused start begins nothing in S3.
	if err := s.checkEnqueueRate(ctx, owner); err != nil {
		return nil, err
	}
	id := s.eng.newID()
	key := uploadKey(owner, id)
	now := s.eng.now()
	up, urls, err := s.uploads.Begin(ctx, key, partSizes(bytes), uploadLinks)
	if err != nil {
		return nil, fmt.Errorf("%w: begin the upload: %w", ErrUnavailable, err)
	}
	expires := now.Add(uploadWindow)
	payload, err := json.Marshal(uploadSpec{Kind: kind, Bytes: bytes, Upload: up, Expires: expires})
	if err != nil {
		return nil, err
	}
	trusted := *s
	trusted.callers = false
	// Validated in the kind's lane, whose workers' memory is sized for
	// its payloads.
	req := EnqueueRequest{Owner: owner, Kind: uploadKind, Payload: payload, id: id, EnqueueOpts: EnqueueOpts{Lane: k.lane}, rated: true}
	if _, _, err := trusted.enqueue(ctx, req); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = s.uploads.Abort(rctx, key, up)
		return nil, err
	}
	out := &Upload{ID: id, Kind: kind, Bytes: bytes, PartBytes: uploadPartBytes, ExpiresAt: expires, Parts: make([]UploadPart, len(urls))}
	for i, u := range urls {
		out.Parts[i] = UploadPart{Number: i + 1, URL: u}
	}
	return out, nil
}

// CompleteUpload completes the owner's upload id: etags[i] is the ETag
// header the PUT of part i+1 answered. The worker then validates it
// (UploadView.Status "validating"). Completing it again answers it as it
// is; an upload past its window is refused as failed.
func (s *Service) CompleteUpload(ctx context.Context, owner, id string, etags []string) (*UploadView, error) {
	rec, spec, err := s.readUpload(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if rec.Signals[uploadSignal] != nil || rec.Status.Final() {
		return s.GetUpload(ctx, owner, id) // completed before, or ended
	}
	if !s.eng.now().Before(spec.Expires) {
		return nil, refuse(codeUploadGone, "the upload's window to complete it has passed: start another")
	}
	if parts := len(partSizes(spec.Bytes)); len(etags) != parts {
		return nil, refuse(codeInvalidRequest, fmt.Sprintf(`"etags": the upload has %d parts, and %d were named`, parts, len(etags)))
	}
	for i, e := range etags {
		if e == "" || len(e) > 128 || !wire.PrintableASCII(e) {
			return nil, refuse(codeInvalidRequest, fmt.Sprintf(`"etags"[%d]: the ETag header part %d's PUT answered`, i, i+1))
		}
	}
	payload, err := json.Marshal(uploadDone{ETags: etags})
	if err != nil {
		return nil, err
	}
	if _, err := s.signal(ctx, rec, uploadSignal, payload); err != nil && !errors.Is(err, ErrAlreadyFinal) {
		return nil, err
	}
	return s.GetUpload(ctx, owner, id)
}

// GetUpload returns the owner's upload id.
func (s *Service) GetUpload(ctx context.Context, owner, id string) (*UploadView, error) {
	rec, spec, err := s.readUpload(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	v := &UploadView{ID: rec.ID, Kind: spec.Kind, Bytes: spec.Bytes, ExpiresAt: spec.Expires, JobID: uploadJobID(rec.Owner, rec.ID), CreatedAt: rec.CreatedAt}
	switch {
	case rec.Status == StatusSucceeded:
		var info uploadInfo
		if err := json.Unmarshal(rec.Result, &info); err != nil {
			return nil, fmt.Errorf("jobs: upload %s: its description: %w", id, err)
		}
		v.Status, v.SHA256, v.UsableUntil = "ready", info.SHA256, &info.Until
	case rec.Status.Final():
		code := rec.ErrorCode
		if code == "" {
			code = string(rec.Status)
		}
		v.Status, v.Error = "failed", &code
	case rec.Signals[uploadSignal] != nil:
		v.Status = "validating"
	default:
		v.Status = "open"
	}
	return v, nil
}

// readUpload reads the owner's upload id and its declaration.
func (s *Service) readUpload(ctx context.Context, owner, id string) (*driver.Record, uploadSpec, error) {
	var spec uploadSpec
	rec, err := s.get(ctx, owner, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, spec, refuse(codeUnknownUpload, "you have no upload of that id")
	case err != nil:
		return nil, spec, err
	case rec.Kind != uploadKind:
		return nil, spec, refuse(codeUnknownUpload, "you have no upload of that id")
	}
	// A store may keep either part apart, however small (an item's
	// budget, or its object tier's threshold).
	for _, p := range []struct {
		part driver.Part
		into *json.RawMessage
		ref  string
	}{{driver.PartPayload, &rec.Payload, rec.PayloadRef}, {driver.PartResult, &rec.Result, rec.ResultRef}} {
		if *p.into != nil || p.ref == "" {
			continue
		}
		data, _, err := s.store.ReadPart(ctx, rec, p.part)
		if err != nil {
			return nil, spec, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
		*p.into = data
	}
	if err := json.Unmarshal(rec.Payload, &spec); err != nil {
		return nil, spec, fmt.Errorf("jobs: upload %s: its declaration: %w", id, err)
	}
	return rec, spec, nil
}

// fromUpload resolves req.Upload, a ready upload of the owner, into the
// job it makes: its id and its staged payload.
func (s *Service) fromUpload(ctx context.Context, req *EnqueueRequest) error {
	switch {
	case len(req.Payload) > 0 && string(req.Payload) != "null":
		return refuse(codeInvalidRequest, `give "payload" or "upload", not both`)
	case req.IdempotencyKey != "" || req.UniqueKey != "":
		return refuse(codeInvalidRequest, `an upload makes one job, whose id it derives: give no "idempotency_key" or "unique_key"`)
	}
	rec, spec, err := s.readUpload(ctx, req.Owner, req.Upload)
	if err != nil {
		return err
	}
	switch {
	case rec.Status == StatusSucceeded:
	case rec.Status.Final():
		return refuse(codeUploadFailed, fmt.Sprintf("the upload failed (%s): start another", rec.ErrorCode))
	default:
		return refuse(codeUploadNotReady, "the upload is not validated yet: complete it, and enqueue it once GET /v1/uploads/{id} says ready")
	}
	var info uploadInfo
	if err := json.Unmarshal(rec.Result, &info); err != nil {
		return fmt.Errorf("jobs: upload %s: its description: %w", rec.ID, err)
	}
	switch {
	case spec.Kind != req.Kind:
		return refuse(codeInvalidRequest, fmt.Sprintf("the upload is of kind %q", spec.Kind))
	case !s.eng.now().Before(info.Until):
		return refuse(codeUploadGone, "the upload is past its day: start another")
	}
	req.id = uploadJobID(req.Owner, rec.ID)
	req.Payload = nil
	req.fromUpload = &uploadReady{staged: driver.Staged{Ref: info.Ref, Bytes: info.Stored}, sha256: info.SHA256}
	return nil
}
