package s3objects

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestTheLinkIsScopedAndShort: what S3 enforces of a presigned link and
// the emulator does not (it checks no signature), asserted on the link:
// it reads one object (GET, its key, nothing else signed but the host),
// for at most MaxURL, with a SigV4 signature of the functions' role.
func TestTheLinkIsScopedAndShort(t *testing.T) {
	client := s3.New(s3.Options{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	o := New(client, "jobs-parts")
	const key = "parts/ab12/01a2/result-Zx"
	for _, tc := range []struct {
		ask  time.Duration
		want string
	}{{time.Minute, "60"}, {time.Hour, "300"}, {0, "300"}} {
		link, err := o.URL(context.Background(), key, tc.ask)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(link)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		if got := q.Get("X-Amz-Expires"); got != tc.want {
			t.Errorf("asked for %v: expires in %s s, want %s", tc.ask, got, tc.want)
		}
		if u.Host != "jobs-parts.s3.eu-west-1.amazonaws.com" || u.Path != "/"+key || u.Scheme != "https" {
			t.Errorf("link to %s://%s%s, want the object over https", u.Scheme, u.Host, u.Path)
		}
		if got := q.Get("X-Amz-SignedHeaders"); got != "host" {
			t.Errorf("signed headers %q, want host alone", got)
		}
		if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || !strings.HasPrefix(q.Get("X-Amz-Credential"), "AKIDEXAMPLE/") || q.Get("X-Amz-Signature") == "" {
			t.Errorf("link %s is not signed with SigV4 by the given credentials", link)
		}
	}
}

// TestKeepTiers: an object is tagged with the first lifetime that covers
// how long its part must last, so the bucket's lifecycle never deletes a
// part before its time; past the last, the last.
func TestKeepTiers(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		until time.Duration
		days  int
	}{{0, 32}, {23 * day, 32}, {32 * day, 32}, {33 * day, 64}, {400 * day, 512}, {746 * day, 1024}, {2000 * day, 2048}, {4096 * day, 4096}} {
		days, end, err := keepFor(now, now.Add(tc.until))
		if err != nil || days != tc.days || !end.Equal(now.Add(time.Duration(days)*day)) {
			t.Errorf("a part due to last %v: tagged %d days until %v (%v), want %d", tc.until, days, end, err, tc.days)
		}
	}
	// Past the longest rule, no tag would keep it: refused, never cut short.
	if days, _, err := keepFor(now, now.Add(4097*day)); err == nil {
		t.Errorf("a part due to last 4,097 days: tagged %d days, want an error", days)
	}
	if got := tagging(64); got != "lj-keep=64" {
		t.Errorf("tagging %q", got)
	}
	if escapeKey("parts/a b/c") != "parts/a%20b/c" {
		t.Errorf("copy source key %q", escapeKey("parts/a b/c"))
	}
}

// fakeS3 records which checksum setting each multipart call was made with.
type fakeS3 struct {
	API
	calc   map[string]aws.RequestChecksumCalculation
	meta   map[string]string // HeadObject's metadata
	copies []string          // each copy's tagging
}

func (f *fakeS3) opts(op string, fns []func(*s3.Options)) {
	var o s3.Options
	for _, fn := range fns {
		fn(&o)
	}
	f.calc[op] = o.RequestChecksumCalculation
}

func (f *fakeS3) HeadObject(context.Context, *s3.HeadObjectInput, ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	return &s3.HeadObjectOutput{Metadata: f.meta}, nil
}

func (f *fakeS3) CopyObject(_ context.Context, in *s3.CopyObjectInput, _ ...func(*s3.Options)) (*s3.CopyObjectOutput, error) {
	f.copies = append(f.copies, aws.ToString(in.Tagging))
	return &s3.CopyObjectOutput{}, nil
}

func (f *fakeS3) CreateMultipartUpload(_ context.Context, _ *s3.CreateMultipartUploadInput, fns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error) {
	f.opts("create", fns)
	return &s3.CreateMultipartUploadOutput{UploadId: aws.String("u")}, nil
}

func (f *fakeS3) UploadPart(_ context.Context, in *s3.UploadPartInput, fns ...func(*s3.Options)) (*s3.UploadPartOutput, error) {
	f.opts("part", fns)
	return &s3.UploadPartOutput{ETag: aws.String(`"e"`)}, nil
}

func (f *fakeS3) CompleteMultipartUpload(_ context.Context, in *s3.CompleteMultipartUploadInput, fns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	f.opts("complete", fns)
	return &s3.CompleteMultipartUploadOutput{}, nil
}

// TestMultipartSendsNoChecksums: a multipart write asks the SDK for no
// flexible checksums on its create, parts and complete, which S3 would
// refuse as InvalidPart when the parts carry one the create did not
// declare (the emulator checks none, so this is where it is held).
func TestMultipartSendsNoChecksums(t *testing.T) {
	f := &fakeS3{calc: map[string]aws.RequestChecksumCalculation{}}
	o := &Objects{api: f, bucket: "b", now: time.Now}
	if err := o.Put(context.Background(), "parts/x", make([]byte, PartBytes+1), time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"create", "part", "complete"} {
		if f.calc[op] != aws.RequestChecksumCalculationWhenRequired {
			t.Errorf("%s: checksum calculation %v, want only when required", op, f.calc[op])
		}
	}
}

// TestKeepNeverShortensAnObjectsLife: Keep copies an object onto itself
// only when it would not last until asked; an object tagged for longer (a
// job that waits on its parents) keeps its tag.
func TestKeepNeverShortensAnObjectsLife(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	long := now.Add(512 * 24 * time.Hour)
	f := &fakeS3{calc: map[string]aws.RequestChecksumCalculation{}, meta: map[string]string{metaUntil: strconv.FormatInt(long.Unix(), 10)}}
	o := &Objects{api: f, bucket: "b", now: func() time.Time { return now }}
	if err := o.Keep(context.Background(), "parts/x", now.Add(20*24*time.Hour)); err != nil || len(f.copies) != 0 {
		t.Fatalf("keeping for 20 days an object that lasts 512: %v, copies %v; want none", err, f.copies)
	}
	if err := o.Keep(context.Background(), "parts/x", now.Add(600*24*time.Hour)); err != nil || len(f.copies) != 1 || f.copies[0] != "lj-keep=1024" {
		t.Fatalf("keeping it for 600 days: %v, copies %v; want one, tagged 1024", err, f.copies)
	}
}

// TestUploadLinksAreScopedAndShort: what S3 enforces of a presigned part
// upload and the emulator does not (it checks no signature), asserted on
// each link: a PUT of one part of one upload at the key given (the
// engine's, under uploads/<owner hash>/<upload id>/), signed by the
// functions' role with SigV4 over the host and the part's length, for at
// most MaxUploadURL, and with no checksum the create did not declare.
func TestUploadLinksAreScopedAndShort(t *testing.T) {
	client := s3.New(s3.Options{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "")})
	f := &fakeS3{calc: map[string]aws.RequestChecksumCalculation{}}
	o := &Objects{api: f, presign: s3.NewPresignClient(client), bucket: "jobs-parts", now: time.Now}
	const key = "uploads/0123abcd/01jupload/payload"
	for _, tc := range []struct {
		ask  time.Duration
		want string
	}{{time.Minute, "60"}, {time.Hour, "900"}, {0, "900"}} {
		id, urls, err := o.Begin(context.Background(), key, []int{8 << 20, 8 << 20, 1234}, tc.ask)
		if err != nil || id != "u" || len(urls) != 3 {
			t.Fatalf("Begin: %q, %d links, %v", id, len(urls), err)
		}
		for i, link := range urls {
			u, err := url.Parse(link)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			if got := q.Get("X-Amz-Expires"); got != tc.want {
				t.Errorf("asked for %v: part %d expires in %s s, want %s", tc.ask, i+1, got, tc.want)
			}
			if u.Scheme != "https" || u.Host != "jobs-parts.s3.eu-west-1.amazonaws.com" || u.Path != "/"+key {
				t.Errorf("part %d links to %s://%s%s, want the upload's key over https", i+1, u.Scheme, u.Host, u.Path)
			}
			if q.Get("uploadId") != "u" || q.Get("partNumber") != strconv.Itoa(i+1) || q.Get("x-id") != "UploadPart" {
				t.Errorf("part %d: uploadId %q partNumber %q x-id %q, want its own part of upload u", i+1, q.Get("uploadId"), q.Get("partNumber"), q.Get("x-id"))
			}
			// The part's length is signed: S3 refuses a PUT of another.
			if got := q.Get("X-Amz-SignedHeaders"); got != "content-length;host" {
				t.Errorf("part %d: signed headers %q, want its length and the host", i+1, got)
			}
			for k := range q {
				if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum") || strings.HasPrefix(strings.ToLower(k), "x-amz-sdk-checksum") {
					t.Errorf("part %d: link carries %s, which S3 would hold against the parts at the complete", i+1, k)
				}
			}
			if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" || !strings.HasPrefix(q.Get("X-Amz-Credential"), "AKIDEXAMPLE/") || q.Get("X-Amz-Signature") == "" {
				t.Errorf("part %d: link %s is not signed with SigV4 by the given credentials", i+1, link)
			}
		}
	}
	if f.calc["create"] != aws.RequestChecksumCalculationWhenRequired {
		t.Errorf("the upload's create asks for checksums (%v)", f.calc["create"])
	}
	if _, _, err := o.Begin(context.Background(), key, nil, time.Minute); err == nil {
		t.Error("an upload of no parts began")
	}
}
