package jobs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/keyring"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type chargePayload struct {
	Customer  string `json:"customer"`
	CardToken string `json:"card_token" jobs:"secret"`
	PIN       int    `jobs:"secret"`
}

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSecretFieldsAreSealedAtRestAndOpenedForTheHandler(t *testing.T) {
	t.Parallel()
	sealer, err := jobs.NewAESSealer(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	var got chargePayload
	jobs.MustRegister(reg, "charge",
		func(_ context.Context, j *jobs.Job[chargePayload]) (jobs.NoResult, error) {
			got = j.Payload
			return jobs.NoResult{}, nil
		}, nil)
	store := jobstest.NewMemStore(nil)
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// "CARD_TOKEN": encoding/json would decode it into CardToken, so it is sealed too.
	rec, _, err := enqueued(svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "charge", Payload: []byte(`{"customer":"c1","CARD_TOKEN":"tok_visa_4242","PIN":1234}`)}))
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := store.Get(ctx, rec.ID)
	if bytes.Contains(stored.Payload, []byte("tok_visa_4242")) || bytes.Contains(stored.Payload, []byte("1234")) || !bytes.Contains(stored.Payload, []byte(`"customer":"c1"`)) {
		t.Fatalf("stored payload %s", stored.Payload)
	}
	if !strings.Contains(string(stored.Payload), `"$sealed":"v1.`) {
		t.Fatalf("stored payload is not sealed: %s", stored.Payload)
	}
	if _, err := w.HandleSQS(ctx, sqsEvent(message.Encode(rec.ID))); err != nil {
		t.Fatal(err)
	}
	if got.CardToken != "tok_visa_4242" || got.PIN != 1234 || got.Customer != "c1" {
		t.Fatalf("handler got %+v", got)
	}
}

func TestSealedValuesAreBoundToJobAndField(t *testing.T) {
	t.Parallel()
	s, _ := jobs.NewAESSealer(newKey(t))
	sealed, err := s.Seal([]byte(`"secret"`), []byte("job-1/card"))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := s.Open(sealed, []byte("job-1/card")); err != nil || string(plain) != `"secret"` {
		t.Fatalf("Open = %s, %v", plain, err)
	}
	if _, err := s.Open(sealed, []byte("job-2/card")); !errors.Is(err, jobs.ErrUnseal) {
		t.Fatalf("moved to another job: %v", err)
	}
	// Flip one character well inside the ciphertext: the last characters
	// may carry padding bits or already read "AA".
	i := len(sealed) - 6
	flip := byte('A')
	if sealed[i] == 'A' {
		flip = 'B'
	}
	tampered := sealed[:i] + string(flip) + sealed[i+1:]
	if _, err := s.Open(tampered, []byte("job-1/card")); !errors.Is(err, jobs.ErrUnseal) {
		t.Fatalf("tampered: %v", err)
	}
	other, _ := jobs.NewAESSealer(newKey(t))
	if _, err := other.Open(sealed, []byte("job-1/card")); !errors.Is(err, jobs.ErrUnseal) {
		t.Fatalf("another key: %v", err)
	}
	// Rotation: the new key first, the old one still opens old values.
	oldKey, newK := newKey(t), newKey(t)
	old, _ := jobs.NewAESSealer(oldKey)
	v, _ := old.Seal([]byte(`1`), nil)
	rotated, _ := jobs.NewAESSealer(newK, oldKey)
	if p, err := rotated.Open(v, nil); err != nil || string(p) != "1" {
		t.Fatalf("rotated keyring cannot open an old value: %v", err)
	}
}

func TestSecretFieldsNeedASealer(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "charge",
		func(context.Context, *jobs.Job[chargePayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	if _, err := testroles.Service(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), Queue: &jobstest.MemQueue{}}); !errors.Is(err, jobs.ErrNoSealer) {
		t.Fatalf("NewService: %v", err)
	}
	if _, err := testroles.Worker(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil)}); !errors.Is(err, jobs.ErrNoSealer) {
		t.Fatalf("NewWorker: %v", err)
	}
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	keys, err := keyring.Parse("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=, AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=")
	if err != nil || len(keys) != 2 || len(keys[0]) != 32 {
		t.Fatalf("ParseKeys: %d keys, %v", len(keys), err)
	}
	if _, err := keyring.Parse("not base64!"); err == nil {
		t.Fatal("bad base64 accepted")
	}
	if _, err := jobs.NewAESSealer([]byte("short")); err == nil {
		t.Fatal("short key accepted")
	}
}

type innerSecret struct {
	Token string `json:"token" jobs:"secret"`
}

type nestedPayload struct {
	Inner innerSecret `json:"inner"`
}

type embeddedPayload struct {
	innerSecret
	Name string `json:"name"`
}

type embeddedTagged struct {
	innerSecret `jobs:"secret"`
}

type unexportedPayload struct {
	//lint:ignore U1000 the field exists to be refused: unexported, never encoded
	token string `jobs:"secret"`
}

type dashPayload struct {
	Token string `json:"-" jobs:"secret"`
}

type badNamePayload struct {
	//lint:ignore SA5008 the test needs a json name encoding/json refuses
	Token string `json:"to\\ken" jobs:"secret"`
}

type listPayload struct {
	Items []innerSecret `json:"items"`
}

// A jobs:"secret" tag that sealing would miss refuses the registration,
// instead of storing the value in plain text.
func TestRegisterRefusesSecretTagsItCannotSeal(t *testing.T) {
	t.Parallel()
	tests := map[string]func(*jobs.Registry) error{
		"nested": func(r *jobs.Registry) error {
			_, err := jobs.Register(r, "k", nil2[nestedPayload], nil)
			return err
		},
		"embedded": func(r *jobs.Registry) error {
			_, err := jobs.Register(r, "k", nil2[embeddedPayload], nil)
			return err
		},
		"embedded, tagged": func(r *jobs.Registry) error {
			_, err := jobs.Register(r, "k", nil2[embeddedTagged], nil)
			return err
		},
		"unexported": func(r *jobs.Registry) error {
			_, err := jobs.Register(r, "k", nil2[unexportedPayload], nil)
			return err
		},
		"json -": func(r *jobs.Registry) error {
			_, err := jobs.Register(r, "k", nil2[dashPayload], nil)
			return err
		},
		"name encoding/json refuses": func(r *jobs.Registry) error {
			_, err := jobs.Register(r, "k", nil2[badNamePayload], nil)
			return err
		},
		"in a slice": func(r *jobs.Registry) error {
			_, err := jobs.Register(r, "k", nil2[listPayload], nil)
			return err
		},
	}
	for name, register := range tests {
		if err := register(jobs.NewRegistry()); !errors.Is(err, jobs.ErrSecretTag) {
			t.Errorf("%s: %v, want ErrSecretTag", name, err)
		}
	}
}

func nil2[P any](context.Context, *jobs.Job[P]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }

// plainSealer seals nothing of note and keys no hash.
type plainSealer struct{}

func (plainSealer) Seal(p, _ []byte) (string, error)        { return string(p), nil }
func (plainSealer) Open(s string, _ []byte) ([]byte, error) { return []byte(s), nil }

type keyedSealer struct{ plainSealer }

func (keyedSealer) RequestHashKey() []byte { return bytes.Repeat([]byte{7}, 32) }

// With secret fields, a Sealer of one's own must key request hashes too.
func TestCustomSealerMustKeyRequestHashes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sealer jobs.Sealer
		ok     bool
	}{{plainSealer{}, false}, {keyedSealer{}, true}} {
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "charge", nil2[chargePayload], nil)
		_, err := testroles.Service(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), Queue: &jobstest.MemQueue{}, Sealer: tt.sealer})
		if (err == nil) != tt.ok {
			t.Errorf("%T: %v", tt.sealer, err)
		}
	}
}

// A payload whose secret fields the worker's key ring cannot open is
// handed back, no attempt spent, while the job is young (waiting_on key: a
// rotation's new key may not have reached this instance yet), then fails
// with its own reserved code, payload_unreadable, without running the
// handler: an operator looks at the key ring, not at the payload's type
// (which invalid_payload would send them to).
func TestPayloadSealedWithAnotherKeyFailsUnreadable(t *testing.T) {
	t.Parallel()
	enqueuer, err := jobs.NewAESSealer(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	other, err := jobs.NewAESSealer(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	registry := func() *jobs.Registry {
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "charge", func(_ context.Context, j *jobs.Job[chargePayload]) (jobs.NoResult, error) {
			ran = true
			return jobs.NoResult{}, nil
		}, nil)
		return reg
	}
	clock := jobstest.NewClock(time.Now())
	store := jobstest.NewMemStore(clock)
	svc, err := testroles.Service(jobs.Config{Registry: registry(), Store: store, Queue: &jobstest.MemQueue{}, Sealer: enqueuer, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(jobs.Config{Registry: registry(), Store: store, Queue: &jobstest.MemQueue{}, Sealer: other, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec, _, err := enqueued(svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "charge", Payload: []byte(`{"customer":"c1","card_token":"tok","PIN":1}`)}))
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := w.HandleSQS(ctx, sqsEvent(message.Encode(rec.ID))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v: the job is handed back by a message of its own", failedIDs(resp))
	}
	if got, _ := store.Get(ctx, rec.ID); got.Status != jobs.StatusQueued || got.WaitingOn != "key" || got.Attempt != 0 || ran {
		t.Fatalf("a young job: %s, waiting on %q, attempt %d, handler ran %v; want it handed back, waiting on key", got.Status, got.WaitingOn, got.Attempt, ran)
	}
	clock.Advance(31 * time.Minute)
	if resp, _ := w.HandleSQS(ctx, sqsEvent(message.Encode(rec.ID))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v: the failure is final", failedIDs(resp))
	}
	got, _ := store.Get(ctx, rec.ID)
	if got.Status != jobs.StatusFailed || got.ErrorCode != jobs.CodePayloadUnreadable || ran {
		t.Fatalf("job %s %q, handler ran %v; want failed %s without a run", got.Status, got.ErrorCode, ran, jobs.CodePayloadUnreadable)
	}
	if !jobs.ReservedCodes()[jobs.CodePayloadUnreadable] {
		t.Fatalf("%s is not reserved: a kind could declare it", jobs.CodePayloadUnreadable)
	}
}
