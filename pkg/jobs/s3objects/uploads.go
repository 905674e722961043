package s3objects

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Uploads: Objects keeps the payloads callers upload (driver.Uploads), in
// the same bucket under uploads/, as S3 multipart uploads whose parts the
// callers PUT through presigned URLs. The bucket's lifecycle deletes what
// rests under uploads/ after a day and aborts multipart uploads left
// unfinished after a day; a worker deletes each upload once it has
// validated it.

var _ driver.Uploads = (*Objects)(nil)

// MaxUploadURL is the longest a link to upload a part lasts.
const MaxUploadURL = 15 * time.Minute

// Begin starts a multipart upload at key and presigns an UploadPart PUT
// for each of its parts, valid for ttl (at most MaxUploadURL, and less
// when the credentials that sign it expire sooner). Each URL signs the
// host and its part's Content-Length: S3 refuses a part of another size,
// so the object cannot pass the size declared (the worker that validates
// the upload checks it again, as the emulator checks no signature).
func (o *Objects) Begin(ctx context.Context, key string, sizes []int, ttl time.Duration) (string, []string, error) {
	if len(sizes) < 1 || len(sizes) > 10000 {
		return "", nil, fmt.Errorf("s3objects: an upload of %d parts, want 1 to 10,000", len(sizes))
	}
	if ttl <= 0 || ttl > MaxUploadURL {
		ttl = MaxUploadURL
	}
	up, err := o.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: &o.bucket, Key: &key, ContentType: aws.String("application/json"),
	}, noChecksums)
	if err != nil {
		return "", nil, err
	}
	urls := make([]string, len(sizes))
	for i, size := range sizes {
		n := int32(i + 1)
		req, err := o.presign.PresignUploadPart(ctx, &s3.UploadPartInput{
			Bucket: &o.bucket, Key: &key, UploadId: up.UploadId, PartNumber: &n, ContentLength: aws.Int64(int64(size)),
		}, s3.WithPresignExpires(ttl), func(po *s3.PresignOptions) {
			po.ClientOptions = append(po.ClientOptions, noChecksums)
		})
		if err != nil {
			o.abort(key, up.UploadId)
			return "", nil, err
		}
		urls[i] = req.URL
	}
	return aws.ToString(up.UploadId), urls, nil
}

// Complete joins the parts of upload id at key.
func (o *Objects) Complete(ctx context.Context, key, id string, etags []string) error {
	parts := make([]types.CompletedPart, len(etags))
	for i, e := range etags {
		// Without quotes, as Put sends them (the emulator does not decode
		// the SDK's &#34;).
		parts[i] = types.CompletedPart{ETag: aws.String(strings.Trim(e, `"`)), PartNumber: aws.Int32(int32(i + 1))}
	}
	_, err := o.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &o.bucket, Key: &key, UploadId: &id,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}, noChecksums)
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "InvalidPart", "InvalidPartOrder", "NoSuchUpload", "EntityTooSmall":
			return fmt.Errorf("%w: %s", driver.ErrUploadParts, ae.ErrorCode())
		}
	}
	return err
}

// Read reads the object at key whole, refusing one of more than max
// bytes before it reads it.
func (o *Objects) Read(ctx context.Context, key string, max int) ([]byte, error) {
	out, err := o.api.GetObject(ctx, &s3.GetObjectInput{Bucket: &o.bucket, Key: &key})
	if missing(err) {
		return nil, driver.ErrPartMissing
	}
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength > int64(max) {
		return nil, fmt.Errorf("%w: %d bytes, declared %d", driver.ErrUploadTooLarge, *out.ContentLength, max)
	}
	body, err := io.ReadAll(io.LimitReader(out.Body, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(body) > max {
		return nil, fmt.Errorf("%w: more than the %d declared", driver.ErrUploadTooLarge, max)
	}
	return body, nil
}

// Abort ends upload id at key and deletes its parts.
func (o *Objects) Abort(ctx context.Context, key, id string) error {
	_, err := o.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &o.bucket, Key: &key, UploadId: &id})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchUpload" {
		return nil
	}
	return err
}

// Remove deletes the object at key (S3 answers a delete of a missing key
// as done).
func (o *Objects) Remove(ctx context.Context, key string) error {
	_, err := o.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &o.bucket, Key: &key})
	return err
}
