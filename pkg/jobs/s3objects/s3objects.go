// Package s3objects keeps the payloads and final results of jobs that are
// cheaper as S3 objects than as DynamoDB items (a claim check): it is
// dynamostore.Objects on one bucket, with the SDK's S3 client.
//
// It is a package of its own so that a program without large payloads
// links no S3 client: lambdafn.Opts.Objects takes Tier{}, and the CDK
// construct creates the bucket (JOBS_BUCKET) only when a kind allows
// parts past an item's bound.
//
// How long an object lasts is the bucket's lifecycle, by the tag
// TagKeep: an object tagged "lj-keep=N" expires N days after it was last
// written, for N in KeepDays (the construct writes one rule each). Put
// tags an object with the first N that covers how long its part must
// last; Keep copies it onto itself with a later one (a copy resets the
// age S3 counts from). The metadata "lj-until" says until when, for Get.
// docs/evidence/CAPACITY.md has the prices; docs/operations/SECURITY.md the bucket's policy.
package s3objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// TagKeep is the object tag the bucket's lifecycle rules expire by.
const TagKeep = "lj-keep"

// KeepDays are the lifetimes an object may be tagged with, each a
// lifecycle rule of the bucket: the first covers a job's horizon (16
// days) and the default retention (7); the last a year's delay, the
// horizon and ten years' retention. A part that must last longer is not
// written (Put and Keep return an error): an object never ends before
// the job that names it.
var KeepDays = []int{32, 64, 128, 256, 512, 1024, 2048, 4096}

// metaUntil is the user metadata that says until when an object lasts
// (Unix seconds).
const metaUntil = "lj-until"

// PartBytes is the size of each part of a multipart write: bodies larger
// than one part are written in parts (S3 takes 5 GB in one PUT; the local
// emulator 11 MiB, and a part retried costs one part).
const PartBytes = 8 << 20

// MaxBytes is the largest object kept: a payload or result past it is
// refused at enqueue or fails result_too_large (jobs.KindOpts).
const MaxBytes = 100 << 20

// MaxURL is the longest a link to an object lasts.
const MaxURL = 5 * time.Minute

// API is the part of the S3 client Objects uses.
type API interface {
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(context.Context, *s3.GetObjectInput, ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	CopyObject(context.Context, *s3.CopyObjectInput, ...func(*s3.Options)) (*s3.CopyObjectOutput, error)
	CreateMultipartUpload(context.Context, *s3.CreateMultipartUploadInput, ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(context.Context, *s3.UploadPartInput, ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(context.Context, *s3.CompleteMultipartUploadInput, ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(context.Context, *s3.AbortMultipartUploadInput, ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
	DeleteObject(context.Context, *s3.DeleteObjectInput, ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
}

// Objects is dynamostore.Objects on one S3 bucket.
type Objects struct {
	api     API
	presign *s3.PresignClient
	bucket  string
	now     func() time.Time
}

var _ dynamostore.Objects = (*Objects)(nil)

// New returns the Objects of bucket through client.
func New(client *s3.Client, bucket string) *Objects {
	return &Objects{api: client, presign: s3.NewPresignClient(client), bucket: bucket, now: time.Now}
}

// Tier is the object tier lambdafn.Opts.Objects takes (lambdafn.ObjectTier):
// its ObjectsFor is FromConfig.
type Tier struct{}

// ObjectsFor returns FromConfig(cfg, bucket).
func (Tier) ObjectsFor(cfg aws.Config, bucket string) dynamostore.Objects {
	return FromConfig(cfg, bucket)
}

// FromConfig builds the S3 client from cfg (path-style when cfg sets an
// endpoint: the local emulator) and returns the Objects of bucket.
func FromConfig(cfg aws.Config, bucket string) dynamostore.Objects {
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = o.BaseEndpoint != nil
	})
	return New(client, bucket)
}

// keepFor is the first of KeepDays that lasts from now until, and when it
// ends; an error when none does.
func keepFor(now, until time.Time) (int, time.Time, error) {
	for _, d := range KeepDays {
		end := now.Add(time.Duration(d) * 24 * time.Hour)
		if !end.Before(until) {
			return d, end, nil
		}
	}
	return 0, time.Time{}, fmt.Errorf("s3objects: an object to last until %s, past the longest lifetime kept (%d days)",
		until.UTC().Format(time.RFC3339), KeepDays[len(KeepDays)-1])
}

// tagging is the tag set of an object kept days.
func tagging(days int) string {
	return url.Values{TagKeep: {strconv.Itoa(days)}}.Encode()
}

func meta(end time.Time) map[string]string {
	return map[string]string{metaUntil: strconv.FormatInt(end.Unix(), 10)}
}

// Put writes body at key, tagged to last until, in parts when it is
// larger than PartBytes.
func (o *Objects) Put(ctx context.Context, key string, body []byte, until time.Time) error {
	if len(body) > MaxBytes {
		return fmt.Errorf("s3objects: %d bytes, more than the %d kept", len(body), MaxBytes)
	}
	days, end, err := keepFor(o.now(), until)
	if err != nil {
		return err
	}
	if len(body) <= PartBytes {
		_, err := o.api.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &o.bucket, Key: &key, Body: bytes.NewReader(body),
			ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json"),
			Tagging: aws.String(tagging(days)), Metadata: meta(end),
		})
		return err
	}
	up, err := o.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &o.bucket, Key: &key, ContentType: aws.String("application/json"),
		Tagging: aws.String(tagging(days)), Metadata: meta(end),
	}, noChecksums)
	if err != nil {
		return err
	}
	var parts []types.CompletedPart
	for i := 0; i*PartBytes < len(body); i++ {
		chunk := body[i*PartBytes : min((i+1)*PartBytes, len(body))]
		n := int32(i + 1)
		out, err := o.api.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: &o.bucket, Key: &key, UploadId: up.UploadId, PartNumber: &n,
			Body: bytes.NewReader(chunk), ContentLength: aws.Int64(int64(len(chunk))),
		}, noChecksums)
		if err != nil {
			o.abort(key, up.UploadId)
			return err
		}
		// The ETag without its quotes, which S3 takes as well (minio-go
		// sends it so): the SDK's XML escapes quotes as &#34;, which the
		// local emulator does not decode.
		parts = append(parts, types.CompletedPart{ETag: aws.String(strings.Trim(aws.ToString(out.ETag), `"`)), PartNumber: &n})
	}
	_, err = o.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &o.bucket, Key: &key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}, noChecksums)
	if err != nil {
		o.abort(key, up.UploadId)
	}
	return err
}

// noChecksums keeps a multipart write's requests free of the flexible
// checksums the SDK adds by default: a part sent with a CRC32 that the
// create did not declare (ChecksumAlgorithm) and the complete does not
// repeat is refused by S3 as InvalidPart (aws-sdk-go-v2#3005; the local
// emulator checks no checksum, so TestMultipartSendsNoChecksums asserts
// it). Each part's body is still covered by SigV4's payload hash, and its
// ETag is checked at the complete.
func noChecksums(o *s3.Options) {
	o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
}

// abort abandons a multipart write, on a context of its own (the caller's
// may be what ended it); the bucket's lifecycle also aborts any left
// after a day.
func (o *Objects) abort(key string, id *string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = o.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &o.bucket, Key: &key, UploadId: id})
}

// Get reads the object at key, at most max bytes.
func (o *Objects) Get(ctx context.Context, key string, max int) ([]byte, time.Time, error) {
	out, err := o.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &o.bucket, Key: &key})
	if missing(err) {
		return nil, time.Time{}, dynamostore.ErrObjectMissing
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength > int64(max) {
		return nil, time.Time{}, fmt.Errorf("%w: %d bytes, want at most %d", dynamostore.ErrObjectMissing, *out.ContentLength, max)
	}
	body, err := io.ReadAll(io.LimitReader(out.Body, int64(max)+1))
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(body) > max {
		return nil, time.Time{}, fmt.Errorf("%w: more than %d bytes", dynamostore.ErrObjectMissing, max)
	}
	return body, untilOf(out.Metadata), nil
}

// untilOf is how long an object lasts, as its metadata says (zero when it
// does not).
func untilOf(m map[string]string) time.Time {
	if s, ok := m[metaUntil]; ok {
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Time{}
}

// Keep makes the object at key last until at least until: a copy onto
// itself, tagged anew (S3 counts a lifecycle's days from the last write),
// unless it lasts that long already (a HEAD reads how long: a copy never
// shortens an object's life, as a longer tag asked for by another caller
// would be lost).
func (o *Objects) Keep(ctx context.Context, key string, until time.Time) error {
	head, err := o.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &o.bucket, Key: &key})
	if missing(err) {
		return dynamostore.ErrObjectMissing
	}
	if err != nil {
		return err
	}
	if cur := untilOf(head.Metadata); !cur.IsZero() && !cur.Before(until) {
		return nil
	}
	days, end, err := keepFor(o.now(), until)
	if err != nil {
		return err
	}
	_, err = o.api.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket: &o.bucket, Key: &key, CopySource: aws.String(url.PathEscape(o.bucket) + "/" + escapeKey(key)),
		ContentType:       aws.String("application/json"),
		MetadataDirective: types.MetadataDirectiveReplace, Metadata: meta(end),
		TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String(tagging(days)),
	})
	if missing(err) {
		return dynamostore.ErrObjectMissing
	}
	return err
}

// escapeKey escapes each segment of key for x-amz-copy-source.
func escapeKey(key string) string {
	u := url.URL{Path: key}
	return u.EscapedPath()
}

// URL presigns a GET of the object at key for ttl (at most MaxURL).
func (o *Objects) URL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if ttl <= 0 || ttl > MaxURL {
		ttl = MaxURL
	}
	req, err := o.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &o.bucket, Key: &key}, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", err
	}
	return req.URL, nil
}

// MaxBytes is the largest object kept (dynamostore.Objects).
func (o *Objects) MaxBytes() int { return MaxBytes }

// missing reports whether err says there is no such object.
func missing(err error) bool {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nsk) || errors.As(err, &nf)
}
