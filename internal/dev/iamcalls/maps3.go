package iamcalls

import (
	"fmt"
	"net/http"
	"strings"
)

// MapS3 returns the authorisations AWS makes for one S3 request (a REST
// call, path-style as the local stack's clients make them), as S3's
// documentation of each operation states them:
//
//   - GetObject and HeadObject: s3:GetObject on the object;
//   - PutObject, a multipart write's CreateMultipartUpload, UploadPart and
//     CompleteMultipartUpload: s3:PutObject on the object, and
//     s3:PutObjectTagging when the request tags it (x-amz-tagging);
//   - CopyObject: s3:GetObject on the source, s3:PutObject on the
//     destination, and s3:PutObjectTagging when it replaces the tags;
//   - AbortMultipartUpload: s3:AbortMultipartUpload; DeleteObject:
//     s3:DeleteObject.
//
// An object of the stack's bucket under parts/ is recorded as
// "bucket/parts", one under uploads/ as "bucket/uploads"; any other bucket or key, or a request on a bucket
// itself, is an error (no function makes one).
func MapS3(principal string, r *http.Request, n Names) ([]Call, error) {
	resource, err := n.object(r.URL.Path)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	call := func(action string) Call { return Call{Principal: principal, Action: action, Resource: resource} }
	tagged := r.Header.Get("X-Amz-Tagging") != ""
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return []Call{call("s3:GetObject")}, nil
	case http.MethodDelete:
		if q.Has("uploadId") {
			return []Call{call("s3:AbortMultipartUpload")}, nil
		}
		return []Call{call("s3:DeleteObject")}, nil
	case http.MethodPut, http.MethodPost:
		calls := []Call{call("s3:PutObject")}
		if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
			from, err := n.object("/" + strings.TrimPrefix(src, "/"))
			if err != nil {
				return nil, err
			}
			calls = append(calls, Call{Principal: principal, Action: "s3:GetObject", Resource: from})
			tagged = strings.EqualFold(r.Header.Get("X-Amz-Tagging-Directive"), "REPLACE")
		}
		if tagged {
			calls = append(calls, call("s3:PutObjectTagging"))
		}
		return calls, nil
	}
	return nil, fmt.Errorf("iamcalls: S3 %s %s has no mapping", r.Method, r.URL.Path)
}

// object is how the deployment names the object at a path-style path.
func (n Names) object(path string) (string, error) {
	bucket, key, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || key == "" || bucket != n.Bucket || n.Bucket == "" {
		return "", fmt.Errorf("iamcalls: S3 object %q is not in the stack's bucket", path)
	}
	switch {
	case strings.HasPrefix(key, "parts/"):
		return "bucket/parts", nil
	case strings.HasPrefix(key, "uploads/"):
		return "bucket/uploads", nil
	}
	return "", fmt.Errorf("iamcalls: S3 object %q is not under parts/ or uploads/", path)
}
