package driver

import (
	"context"
	"errors"
	"time"
)

// UploadKeeper is implemented by a store that takes payloads its callers
// upload in parts (POST /v1/uploads, jobs.Service.StartUpload): Uploads
// returns where they rest until a worker validates them, or nil when the
// store has nowhere (dynamostore without an object tier, or one whose
// tier does not take uploads).
type UploadKeeper interface {
	Uploads() Uploads
}

// Uploads keeps uploaded payloads: package s3objects on the deployment's
// bucket (a multipart upload through presigned URLs), jobstest's MemStore
// in memory. Keys are the engine's (under uploads/).
type Uploads interface {
	// Begin starts an upload at key of parts of sizes[i] bytes and
	// returns its id and, for each part in order, a URL that uploads it
	// with a PUT of exactly its size, valid for ttl.
	Begin(ctx context.Context, key string, sizes []int, ttl time.Duration) (id string, urls []string, err error)
	// Complete joins the parts of upload id at key into one object:
	// etags[i] is what the PUT of part i+1 answered. ErrUploadParts when
	// they do not name the parts uploaded, or the upload is not there
	// (completed, aborted, or never begun).
	Complete(ctx context.Context, key, id string, etags []string) error
	// Read reads the object at key whole: ErrUploadTooLarge when it has
	// more than max bytes, ErrPartMissing when there is none.
	Read(ctx context.Context, key string, max int) ([]byte, error)
	// Abort ends upload id at key and deletes its parts; one not there
	// is no error.
	Abort(ctx context.Context, key, id string) error
	// Remove deletes the object at key; none there is no error.
	Remove(ctx context.Context, key string) error
}

// PayloadStager is implemented by a store that writes a job's payload
// before the job (an uploaded payload, validated and sealed by a worker
// for the job it will be): StagePayload writes payload as job id's, to
// last until, and returns what Create then takes instead of the payload,
// Record.PayloadRef and Record.PayloadBytes with Payload nil. Create makes
// a staged payload last until Record.PayloadUntil, and fails with
// ErrPartMissing when it is gone.
type PayloadStager interface {
	StagePayload(ctx context.Context, id string, payload []byte, until time.Time) (Staged, error)
}

var (
	// ErrUploadTooLarge: an uploaded object has more bytes than its
	// upload declared.
	ErrUploadTooLarge = errors.New("driver: the upload has more bytes than declared")
	// ErrUploadParts: the parts named to complete an upload are not the
	// parts uploaded.
	ErrUploadParts = errors.New("driver: the parts named are not the upload's")
)
