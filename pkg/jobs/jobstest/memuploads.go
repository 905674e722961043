package jobstest

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// MemUploads keeps uploads in memory as S3 does a multipart upload
// (driver.Uploads): Begin answers links of the form
// mem://uploads/<key>?uploadId=..&partNumber=N, which PutPart uploads. As
// the local emulator, it checks no signature: a part of another size than
// its link signs is taken, and the worker's own check of the declared size
// is what a test of it reaches.
// A MemStore that keeps objects (KeepObjectsOver) takes uploads through
// one (Uploads).
type MemUploads struct {
	mu      sync.Mutex
	clock   func() time.Time
	next    int
	open    map[string]*memUpload // upload id -> its parts
	objects map[string][]byte     // key -> a completed upload's object
}

type memUpload struct {
	key   string
	parts map[int][]byte
	until time.Time
}

var _ driver.Uploads = (*MemUploads)(nil)

// NewMemUploads returns an empty MemUploads; clock may be nil for the wall
// clock.
func NewMemUploads(clock func() time.Time) *MemUploads {
	if clock == nil {
		clock = time.Now
	}
	return &MemUploads{clock: clock, open: map[string]*memUpload{}, objects: map[string][]byte{}}
}

// Begin starts an upload (driver.Uploads).
func (u *MemUploads) Begin(_ context.Context, key string, sizes []int, ttl time.Duration) (string, []string, error) {
	parts := len(sizes)
	if parts < 1 || parts > 10000 {
		return "", nil, fmt.Errorf("jobstest: an upload of %d parts", parts)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.next++
	id := "mem-" + strconv.Itoa(u.next)
	u.open[id] = &memUpload{key: key, parts: map[int][]byte{}, until: u.clock().Add(ttl)}
	urls := make([]string, parts)
	for i := range urls {
		urls[i] = "mem://" + key + "?" + url.Values{"uploadId": {id}, "partNumber": {strconv.Itoa(i + 1)}}.Encode()
	}
	return id, urls, nil
}

// PutPart uploads body through a link Begin answered, as a caller's PUT
// would, and returns its ETag.
func (u *MemUploads) PutPart(link string, body []byte) (string, error) {
	p, err := url.Parse(link)
	if err != nil || p.Scheme != "mem" {
		return "", fmt.Errorf("jobstest: %q is not a MemUploads link", link)
	}
	n, err := strconv.Atoi(p.Query().Get("partNumber"))
	if err != nil {
		return "", fmt.Errorf("jobstest: link %q: no part number", link)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	up, ok := u.open[p.Query().Get("uploadId")]
	if !ok || up.key != p.Host+p.Path || !u.clock().Before(up.until) {
		return "", fmt.Errorf("jobstest: link %q: no such upload, or it expired", link)
	}
	up.parts[n] = bytes.Clone(body)
	sum := md5.Sum(body)
	return `"` + hex.EncodeToString(sum[:]) + `"`, nil
}

// Complete joins an upload's parts (driver.Uploads).
func (u *MemUploads) Complete(_ context.Context, key, id string, etags []string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	up, ok := u.open[id]
	if !ok || up.key != key || len(etags) != len(up.parts) {
		return driver.ErrUploadParts
	}
	var all []byte
	for i, e := range etags {
		body, ok := up.parts[i+1]
		sum := md5.Sum(body)
		if !ok || (e != hex.EncodeToString(sum[:]) && e != `"`+hex.EncodeToString(sum[:])+`"`) {
			return driver.ErrUploadParts
		}
		all = append(all, body...)
	}
	delete(u.open, id)
	u.objects[key] = all
	return nil
}

// Read reads a completed upload's object (driver.Uploads).
func (u *MemUploads) Read(_ context.Context, key string, max int) ([]byte, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	body, ok := u.objects[key]
	switch {
	case !ok:
		return nil, driver.ErrPartMissing
	case len(body) > max:
		return nil, fmt.Errorf("%w: %d bytes, declared %d", driver.ErrUploadTooLarge, len(body), max)
	}
	return bytes.Clone(body), nil
}

// Abort ends an upload and drops its parts (driver.Uploads).
func (u *MemUploads) Abort(_ context.Context, key, id string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if up, ok := u.open[id]; ok && up.key == key {
		delete(u.open, id)
	}
	return nil
}

// Remove deletes a completed upload's object (driver.Uploads).
func (u *MemUploads) Remove(_ context.Context, key string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.objects, key)
	return nil
}

// Left is how many uploads are open or rest completed: what a test of
// "nothing left stored" counts.
func (u *MemUploads) Left() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.open) + len(u.objects)
}

// Holds reports what is left of upload id (its key has "/id/"): its
// parts, an upload not completed nor aborted, and its object.
func (u *MemUploads) Holds(id string) (parts, object bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, up := range u.open {
		parts = parts || strings.Contains(up.key, "/"+id+"/")
	}
	for key := range u.objects {
		object = object || strings.Contains(key, "/"+id+"/")
	}
	return parts, object
}

// Uploads are the store's uploads when it keeps objects (KeepObjectsOver;
// driver.UploadKeeper), nil otherwise.
func (m *MemStore) Uploads() driver.Uploads {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objectsOver == 0 {
		return nil
	}
	if m.uploads == nil {
		m.uploads = NewMemUploads(m.clock.Now)
	}
	return m.uploads
}

// StagePayload writes the payload of job id ahead of its job
// (driver.PayloadStager), as an object when the store keeps them
// (KeepObjectsOver), whatever its size.
func (m *MemStore) StagePayload(_ context.Context, id string, payload []byte, until time.Time) (driver.Staged, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objectsOver == 0 {
		return driver.Staged{}, fmt.Errorf("jobstest: StagePayload on a store that keeps no objects (KeepObjectsOver)")
	}
	sum := sha256.Sum256(payload)
	ref := hex.EncodeToString(sum[:8])
	k := "payload#" + id + "#" + ref
	if cur, ok := m.payloads[k]; ok && cur.until.After(until) {
		until = cur.until
	}
	m.payloads[k] = memPayload{data: bytes.Clone(payload), until: until}
	return driver.Staged{Ref: ref, Bytes: len(payload)}, nil
}
