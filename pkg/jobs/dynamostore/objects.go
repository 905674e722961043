package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// A payload or a final result whose stored form (compressed, as its item
// would hold it) is over Config.ObjectThreshold goes, when the store has
// an object tier (Config.Objects: S3, through package s3objects), into
// an object instead of an item: a claim check. The job's item names it as
// it names an item (attrPayloadRef, attrResultRef) and holds its size
// (attrPayloadBytes, attrResultBytes), which is how every reader knows it
// is an object. docs/evidence/CAPACITY.md, "Payloads of any size", has the prices
// the threshold comes from.

// DefaultObjectThreshold is Config.ObjectThreshold's default: the stored
// size above which a part costs less as an S3 object (a PUT, and a GET
// at each read) than as an item (a write unit per KB, and a read unit per
// 4 KB at each read) at on-demand list prices.
const DefaultObjectThreshold = 8 << 10

// maxItemPart is the largest part an item holds: DynamoDB's items stop at
// 400 KB, and the key and TTL need a little.
const maxItemPart = 390 << 10

// attrPayloadBytes and attrResultBytes hold the size of a job's payload
// and final result kept as objects (Record.PayloadBytes, ResultBytes).
const (
	attrPayloadBytes = "pb"
	attrResultBytes  = "rb"
)

// Objects keeps parts of jobs as objects. Package s3objects implements it
// with S3; a store without one keeps every part in items, up to an item's
// bound.
type Objects interface {
	// Put writes body at key, to last at least until.
	Put(ctx context.Context, key string, body []byte, until time.Time) error
	// Get reads the object at key, at most max bytes, and says how long
	// it lasts; ErrObjectMissing when it is not there.
	Get(ctx context.Context, key string, max int) ([]byte, time.Time, error)
	// Keep makes the object at key last at least until.
	Keep(ctx context.Context, key string, until time.Time) error
	// URL returns a link that reads the object at key for ttl.
	URL(ctx context.Context, key string, ttl time.Duration) (string, error)
	// MaxBytes is the largest object it keeps.
	MaxBytes() int
}

// ErrObjectMissing: an Objects has no object at the key (or one past its
// time, or larger than asked).
var ErrObjectMissing = errors.New("dynamostore: no such object")

// ErrNeedsObject: a part is too large for an item and the store has no
// object tier, or it is asked of a transaction, which cannot write one.
var ErrNeedsObject = errors.New("dynamostore: the part needs an object")

// objectKey is where part p of job id named ref rests: under parts/, then
// four hex digits of the id's hash, which spread a burst of jobs (whose
// ids sort by time) over S3's key ranges instead of the newest one.
func objectKey(id string, p driver.Part, ref string) string {
	sum := sha256.Sum256([]byte(id))
	return "parts/" + hex.EncodeToString(sum[:2]) + "/" + id + "/" + string(p) + "-" + ref
}

// threshold is the stored size above which a part becomes an object.
func (s *Store) threshold() int {
	if s.opts.ObjectThreshold > 0 {
		return s.opts.ObjectThreshold
	}
	return DefaultObjectThreshold
}

// asObject reports whether a part whose item would hold stored bytes goes
// into an object instead, or ErrNeedsObject when an item cannot hold it
// and there is no object tier.
func (s *Store) asObject(stored int) (bool, error) {
	switch {
	case s.opts.Objects != nil && stored > s.threshold():
		return true, nil
	case stored > maxItemPart:
		return false, fmt.Errorf("%w: %d bytes, and the store has no object tier (Config.Objects)", ErrNeedsObject, stored)
	}
	return false, nil
}

// storedSize is what an item would hold of part data: compressed when
// that is smaller; a part plainly an object is not compressed to tell.
func (s *Store) storedSize(data []byte) int {
	if s.plainlyObject(len(data)) {
		return len(data)
	}
	if z := deflate(data); z != nil {
		return len(z)
	}
	return len(data)
}

// plainlyObject reports whether a part of n bytes goes to the object tier
// whatever it compresses to: over 64 times the threshold (512 KiB by
// default), where only a part made of repeats would shrink under it, and
// compressing tens of MB to find out costs the enqueue a second of CPU;
// and always past what inflate reads back (maxInflated), whatever the
// threshold, so no item holds a part that could not be read.
func (s *Store) plainlyObject(n int) bool {
	return s.opts.Objects != nil && n > min(64*s.threshold(), maxInflated)
}

// MaxPartBytes is the largest payload or result the store keeps
// (driver.ObjectKeeper): its object tier's, or an item's bound.
func (s *Store) MaxPartBytes() int {
	if s.opts.Objects != nil {
		return s.opts.Objects.MaxBytes()
	}
	return maxItemPart
}

// putObject writes part p of job id as an object and returns its name.
func (s *Store) putObject(ctx context.Context, id string, p driver.Part, data []byte, until time.Time) (string, error) {
	if until.IsZero() {
		until = s.clock.Now().Add(jobs.DefaultRetention)
	}
	ref := payloadRef(data)
	if err := s.opts.Objects.Put(ctx, objectKey(id, p, ref), data, until); err != nil {
		return "", fmt.Errorf("dynamostore: %s of %s as an object: %w", p, id, err)
	}
	return ref, nil
}

// readObject reads part p of rec, kept as an object of size bytes.
func (s *Store) readObject(ctx context.Context, rec *driver.Record, p driver.Part, ref string, size int) ([]byte, time.Time, error) {
	if s.opts.Objects == nil {
		return nil, time.Time{}, fmt.Errorf("dynamostore: %s of %s is an object, and the store has no object tier (Config.Objects)", p, rec.ID)
	}
	data, until, err := s.opts.Objects.Get(ctx, objectKey(rec.ID, p, ref), size)
	if errors.Is(err, ErrObjectMissing) {
		return nil, time.Time{}, driver.ErrPartMissing
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("dynamostore: %s of %s: %w", p, rec.ID, err)
	}
	if !until.IsZero() && !s.clock.Now().Before(until) {
		return nil, time.Time{}, driver.ErrPartMissing
	}
	return data, until, nil
}

// PartURL links part p of rec when it is an object (driver.PartLinker).
func (s *Store) PartURL(ctx context.Context, rec *driver.Record, p driver.Part, ttl time.Duration) (string, error) {
	ref, size := objectOf(rec, p)
	if size == 0 || s.opts.Objects == nil {
		return "", nil
	}
	return s.opts.Objects.URL(ctx, objectKey(rec.ID, p, ref), ttl)
}

// objectOf is the name and size of part p of rec when it is an object
// (size 0 when it is not).
func objectOf(rec *driver.Record, p driver.Part) (string, int) {
	switch p {
	case driver.PartPayload:
		return rec.PayloadRef, rec.PayloadBytes
	case driver.PartResult:
		return rec.ResultRef, rec.ResultBytes
	}
	return "", 0
}

// StagePayload writes the payload of job id as an object before the job
// (driver.PayloadStager): an uploaded payload, sealed for the job it will
// be. Create then takes its name and size.
func (s *Store) StagePayload(ctx context.Context, id string, payload []byte, until time.Time) (driver.Staged, error) {
	if s.opts.Objects == nil {
		return driver.Staged{}, fmt.Errorf("dynamostore: payload of %s: %w", id, ErrNeedsObject)
	}
	ref, err := s.putObject(ctx, id, driver.PartPayload, payload, until)
	if err != nil {
		return driver.Staged{}, err
	}
	return driver.Staged{Ref: ref, Bytes: len(payload)}, nil
}

// staged reports whether rec's payload was staged (StagePayload): named
// and sized, not carried.
func staged(rec *driver.Record) bool {
	return rec.Payload == nil && rec.PayloadRef != "" && rec.PayloadBytes > 0
}

// keepStaged makes the staged payload of rec last until its
// PayloadUntil, or says it is gone (driver.ErrPartMissing).
func (s *Store) keepStaged(ctx context.Context, rec *driver.Record) error {
	until := rec.PayloadUntil
	if until.IsZero() {
		until = s.clock.Now().Add(jobs.DefaultRetention)
	}
	err := s.opts.Objects.Keep(ctx, objectKey(rec.ID, driver.PartPayload, rec.PayloadRef), until)
	if errors.Is(err, ErrObjectMissing) {
		return fmt.Errorf("dynamostore: staged payload of %s: %w", rec.ID, driver.ErrPartMissing)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: staged payload of %s: %w", rec.ID, err)
	}
	return nil
}

// Uploads are the store's object tier's, when it takes uploads
// (driver.UploadKeeper): nil without one.
func (s *Store) Uploads() driver.Uploads {
	u, _ := s.opts.Objects.(driver.Uploads)
	return u
}
