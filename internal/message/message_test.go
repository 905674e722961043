package message_test

import (
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
)

func TestSentTimeRoundTripsAndStaysAJobReference(t *testing.T) {
	id := wire.NewID()
	sent := time.UnixMilli(1_780_000_000_123)
	body := message.EncodeSent(id, sent)
	got, at, err := message.DecodeSent(body)
	if err != nil || got != id || !at.Equal(sent) {
		t.Fatalf("DecodeSent(%s) = %q, %v, %v", body, got, at, err)
	}
	if s := wire.MessageSort(body); s != wire.SortJob {
		t.Fatalf("a message-first reference sorts as %q, want %q (a redrive must move it)", s, wire.SortJob)
	}
	// The plain reference says nothing of its send.
	if got, at, err := message.DecodeSent(message.Encode(id)); err != nil || got != id || !at.IsZero() {
		t.Fatalf("plain reference: %q, %v, %v", got, at, err)
	}
}

func TestOnlyReferencesDecode(t *testing.T) {
	for _, body := range []string{
		`{"job_id":"x","sent":-5}`,
		`{"job_id":"` + wire.NewID() + `","sent":"soon"}`,
		`{"job_id":"` + wire.NewID() + `","kind":"k"}`,
		`{"job_id":"` + wire.NewID() + `","sent":1,"kind":"k"}`,
	} {
		if _, _, err := message.DecodeSent(body); err == nil {
			t.Errorf("DecodeSent(%s) accepted", body)
		}
	}
}
