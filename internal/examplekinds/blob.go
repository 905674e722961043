package examplekinds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Blob shows a kind whose payloads and results are larger than an item
// keeps (KindOpts.MaxPayloadBytes, MaxResultBytes): the store keeps them
// as S3 objects, and the handler sees no difference. Its deployment needs
// the object tier (lambdafn.Opts.Objects, jobsinfra's JobsProps.LargeParts),
// so it is registered apart from the other example kinds (RegisterBlob).
// It runs in the long lane (ExportLane): reading and writing tens of MB
// takes seconds that the default worker's short timeout does not leave,
// and a result not written in the run's time makes the run interrupted.
const Blob = "example.blob"

// BlobPayload is example.blob's payload: any text, how large a result to
// return, and a secret.
type BlobPayload struct {
	Data        string `json:"data"`
	ResultBytes int    `json:"result_bytes,omitempty"`
	// Token is sealed wherever the payload rests, an object included.
	Token string `json:"token,omitempty" jobs:"secret"`
}

// BlobResult is example.blob's result: the payload's size and hash, as the
// handler read it, and Fill of ResultBytes.
type BlobResult struct {
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
	Fill   string `json:"fill,omitempty"`
}

// The bounds of example.blob.
const (
	BlobMaxPayload = 64 << 20
	BlobMaxResult  = 32 << 20
)

// CodeInvalidBlob is example.blob's failure for a result size out of range.
const CodeInvalidBlob = "invalid_blob"

// BlobRun runs example.blob.
func BlobRun(_ context.Context, job *jobs.Job[BlobPayload]) (jobs.JSON[BlobResult], error) {
	p := job.Payload
	if p.ResultBytes < 0 || p.ResultBytes > BlobMaxResult-1024 {
		return jobs.JSON[BlobResult]{}, jobs.Fail(CodeInvalidBlob, errors.New("result size out of range"))
	}
	sum := sha256.Sum256([]byte(p.Data))
	return jobs.JSON[BlobResult]{V: BlobResult{Bytes: len(p.Data), SHA256: hex.EncodeToString(sum[:]), Fill: strings.Repeat("x", p.ResultBytes)}}, nil
}

// RegisterBlob adds example.blob to reg.
func RegisterBlob(reg *jobs.Registry) error {
	_, err := jobs.Register(reg, Blob, BlobRun, &jobs.KindOpts{Lane: ExportLane, FailureCodes: []string{CodeInvalidBlob},
		MaxPayloadBytes: BlobMaxPayload, MaxResultBytes: BlobMaxResult})
	return err
}
