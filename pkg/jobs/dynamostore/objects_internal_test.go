package dynamostore

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// noObjects is an object tier that keeps nothing: the placement of parts
// is decided before any call.
type noObjects struct{}

func (noObjects) Put(context.Context, string, []byte, time.Time) error { return nil }
func (noObjects) Get(context.Context, string, int) ([]byte, time.Time, error) {
	return nil, time.Time{}, ErrObjectMissing
}
func (noObjects) Keep(context.Context, string, time.Time) error              { return nil }
func (noObjects) URL(context.Context, string, time.Duration) (string, error) { return "", nil }
func (noObjects) MaxBytes() int                                              { return 100 << 20 }

// A part larger than inflate reads back is an object whatever it
// compresses to, even under a threshold high enough that its compressed
// form would fit: in an item it could never be read.
func TestAPartPastWhatInflateReadsIsAnObject(t *testing.T) {
	s := New(nil, "t", Config{Objects: noObjects{}, ObjectThreshold: 32 << 10})
	data := bytes.Repeat([]byte(`{"a":1}`), 3<<19/7) // 1.5 MB: under 64 thresholds, a few KB compressed
	if z := deflate(data); z == nil || len(z) > s.threshold() {
		t.Fatalf("the part compresses to %d bytes, want under the threshold for the test to mean anything", len(z))
	}
	object, err := s.asObject(s.storedSize(data))
	if err != nil || !object {
		t.Fatalf("a 1.5 MB part that compresses under the threshold: object %v (%v), want an object", object, err)
	}
	small := bytes.Repeat([]byte(`{"a":1}`), 600<<10/7) // 600 KB: compressed, in an item
	if object, _ := s.asObject(s.storedSize(small)); object {
		t.Fatal("a 600 KB part that compresses under the threshold went to the object tier")
	}
	if got, err := inflate(deflate(small)); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("the 600 KB part does not read back: %v", err)
	}
}
