package localstack_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// startUpload begins an upload as caller and PUTs body's parts through
// the links it answered; it returns the upload and the parts' ETags.
func startUpload(t *testing.T, caller string, declared int, body []byte) (jobs.Upload, []string) {
	t.Helper()
	a := call(t, "POST", "/v1/uploads", caller, "application/json", fmt.Sprintf(`{"kind":%q,"bytes":%d}`, examplekinds.Blob, declared))
	var up jobs.Upload
	if a.status != http.StatusCreated || json.Unmarshal([]byte(a.body), &up) != nil || a.header.Get("Location") != "/v1/uploads/"+up.ID {
		t.Fatalf("POST /v1/uploads: %d %.300s", a.status, a.body)
	}
	var etags []string
	for i, p := range up.Parts {
		chunk := body[min(i*up.PartBytes, len(body)):]
		if i < len(up.Parts)-1 {
			chunk = chunk[:min(up.PartBytes, len(chunk))]
		}
		req, err := http.NewRequest(http.MethodPut, p.URL, bytes.NewReader(chunk))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == "" {
			t.Fatalf("PUT part %d of %d bytes: %d, ETag %q", p.Number, len(chunk), resp.StatusCode, resp.Header.Get("ETag"))
		}
		etags = append(etags, resp.Header.Get("ETag"))
	}
	return up, etags
}

// completeAndWait completes the upload and reads it until it is ready or
// failed.
func completeAndWait(t *testing.T, caller, id string, etags []string) jobs.UploadView {
	t.Helper()
	body, _ := json.Marshal(map[string][]string{"etags": etags})
	a := call(t, "POST", "/v1/uploads/"+id+"/complete", caller, "application/json", string(body))
	if a.status != http.StatusAccepted {
		t.Fatalf("complete %s: %d %.300s", id, a.status, a.body)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		a := call(t, "GET", "/v1/uploads/"+id, caller, "", "")
		var v jobs.UploadView
		if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &v) != nil {
			t.Fatalf("GET /v1/uploads/%s: %d %.300s", id, a.status, a.body)
		}
		if v.Status == "ready" || v.Status == "failed" {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("upload %s still %s after 90 s", id, v.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// objectsUnder lists the keys of the stack's bucket that contain part.
func objectsUnder(t *testing.T, prefix, part string) []string {
	t.Helper()
	s3c := localaws.S3Client(stack.SQSEndpoint)
	list, err := s3c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &stack.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range list.Contents {
		if strings.HasPrefix(*o.Key, prefix) && strings.Contains(*o.Key, part) {
			out = append(out, *o.Key)
		}
	}
	return out
}

// TestAFiftyMegabyteUpload: on the local stack, a 50 MB payload is
// uploaded in 8 MiB parts through presigned links (the emulator takes at
// most 11 MiB a request), completed, validated by a worker of its kind's
// lane, enqueued and run: the handler reads it whole. The payload rests
// with its secret sealed, and nothing is left under uploads/. Enqueueing
// it again answers the same job; another caller cannot. Not parallel:
// its 50 MB would load the two cores under the timed tests that run
// beside it.
func TestAFiftyMegabyteUpload(t *testing.T) {
	const caller, secret = "uploader", "tok-upload-8e41"
	noise := make([]byte, 25<<20)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	data := hex.EncodeToString(noise) // 50 MiB of text
	body, _ := json.Marshal(examplekinds.BlobPayload{Data: data, Token: secret})
	up, etags := startUpload(t, caller, len(body), body)
	if len(up.Parts) != 7 || up.PartBytes != 8<<20 {
		t.Fatalf("an upload of %d bytes: %d parts of %d", len(body), len(up.Parts), up.PartBytes)
	}
	v := completeAndWait(t, caller, up.ID, etags)
	sum := sha256.Sum256(body)
	if v.Status != "ready" || v.SHA256 != hex.EncodeToString(sum[:]) || v.Bytes != len(body) {
		t.Fatalf("the upload, validated: %+v", v)
	}
	if left := objectsUnder(t, "uploads/", up.ID); len(left) != 0 {
		t.Fatalf("left under uploads/: %v", left)
	}
	// The payload's object, read raw: its secret is sealed in it.
	keys := objectsUnder(t, "parts/", "/"+v.JobID+"/payload-")
	if len(keys) != 1 {
		t.Fatalf("payload objects of %s: %v, want one", v.JobID, keys)
	}
	obj, err := localaws.S3Client(stack.SQSEndpoint).GetObject(context.Background(), &s3.GetObjectInput{Bucket: &stack.Bucket, Key: &keys[0]})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if bytes.Contains(raw, []byte(secret)) || !bytes.Contains(raw, []byte(data[:64])) {
		t.Fatalf("the uploaded payload's object holds the secret in the clear, or not the payload (%d bytes)", len(raw))
	}

	if a := call(t, "POST", "/v1/jobs", "someone-else", "application/json", `{"kind":"example.blob","upload":"`+up.ID+`"}`); a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `"unknown_upload"`) {
		t.Fatalf("another caller enqueues the upload: %d %.300s, want 422 unknown_upload", a.status, a.body)
	}
	a := call(t, "POST", "/v1/jobs", caller, "application/json", `{"kind":"example.blob","upload":"`+up.ID+`"}`)
	var job jobs.View
	if a.status != http.StatusAccepted || json.Unmarshal([]byte(a.body), &job) != nil || job.ID != v.JobID {
		t.Fatalf("enqueue the upload: %d %.300s, want job %s", a.status, a.body, v.JobID)
	}
	got, _ := waitFinal(t, caller, job.ID, 90*time.Second)
	var r examplekinds.BlobResult
	if got.Status != jobs.StatusSucceeded || json.Unmarshal(got.Result, &r) != nil {
		t.Fatalf("the upload's job: %+v", got)
	}
	want := sha256.Sum256([]byte(data))
	if r.Bytes != len(data) || r.SHA256 != hex.EncodeToString(want[:]) {
		t.Fatalf("the handler read %d bytes (%s), want %d (%x)", r.Bytes, r.SHA256, len(data), want)
	}
	if a := call(t, "POST", "/v1/jobs", caller, "application/json", `{"kind":"example.blob","upload":"`+up.ID+`"}`); a.status != http.StatusAccepted || a.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the upload enqueued again: %d %.300s, want the same job, replayed", a.status, a.body)
	}
}

// TestBadUploadsMakeNoJob: an upload larger than declared, one that does
// not decode strictly into its kind's payload, and one whose parts are
// named wrong each fail with their code, make no job (enqueueing them is
// a 422), and leave nothing under uploads/. Bad requests are refused.
func TestBadUploadsMakeNoJob(t *testing.T) {
	t.Parallel()
	const caller = "bad-uploader"
	good, _ := json.Marshal(examplekinds.BlobPayload{Data: strings.Repeat("a", 300<<10)})
	for _, tc := range []struct {
		name     string
		declared int
		body     []byte
		etags    func([]string) []string
		code     string
	}{
		{"larger than declared", len(good) - 10, good, nil, "upload_too_large"},
		{"not its kind's payload", 40, []byte(`{"data":"a","extra":true}`), nil, "upload_invalid"},
		{"a missing object", len(good), good, func(e []string) []string { return []string{`"00000000000000000000000000000000"`} }, "upload_incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, etags := startUpload(t, caller, tc.declared, tc.body)
			if tc.etags != nil {
				etags = tc.etags(etags)
			}
			v := completeAndWait(t, caller, up.ID, etags)
			if v.Status != "failed" || v.Error == nil || *v.Error != tc.code {
				t.Fatalf("%+v, want failed %s", v, tc.code)
			}
			a := call(t, "POST", "/v1/jobs", caller, "application/json", `{"kind":"example.blob","upload":"`+up.ID+`"}`)
			if a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `"upload_failed"`) || !strings.Contains(a.body, tc.code) {
				t.Fatalf("enqueue it: %d %.300s, want 422 upload_failed naming %s", a.status, a.body, tc.code)
			}
			if a, _ := get(t, caller, v.JobID); a.status != http.StatusNotFound {
				t.Fatalf("its job: %d, want none", a.status)
			}
			if left := objectsUnder(t, "uploads/", up.ID); len(left) != 0 {
				t.Fatalf("left under uploads/: %v", left)
			}
			if left := objectsUnder(t, "parts/", "/"+v.JobID+"/"); len(left) != 0 {
				t.Fatalf("left under parts/: %v", left)
			}
		})
	}
	for _, tc := range []struct{ body, code string }{
		{`{"kind":"example.blob","bytes":0}`, "invalid_request"},
		{`{"kind":"example.blob"}`, "invalid_request"},
		{`{"kind":"example.blob","bytes":10,"extra":1}`, "invalid_request"},
		{`{"kind":"example.nope","bytes":10}`, "unknown_kind"},
		{fmt.Sprintf(`{"kind":"example.blob","bytes":%d}`, examplekinds.BlobMaxPayload+1), "too_large"},
		{`{"kind":"example.hash","bytes":200000}`, "too_large"},
	} {
		if a := call(t, "POST", "/v1/uploads", caller, "application/json", tc.body); a.status < 400 || a.status >= 500 || !strings.Contains(a.body, `"`+tc.code+`"`) {
			t.Errorf("POST /v1/uploads %s: %d %.300s, want %s", tc.body, a.status, a.body, tc.code)
		}
	}
	if a := call(t, "GET", "/v1/uploads/01JNOSUCHUPLOADNOSUCHUPLOA", caller, "", ""); a.status != http.StatusUnprocessableEntity || !strings.Contains(a.body, `"unknown_upload"`) {
		t.Errorf("GET of an unknown upload: %d %.300s", a.status, a.body)
	}
}
