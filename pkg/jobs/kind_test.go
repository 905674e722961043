package jobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type echoPayload struct {
	Text string `json:"text"`
}

type echoResult struct {
	Text   string
	Secret string // private: not in PublicJSON
}

func (r echoResult) PublicJSON() ([]byte, error) {
	return []byte(`{"text":` + quote(r.Text) + `}`), nil
}

func quote(s string) string { return `"` + s + `"` }

func echo(_ context.Context, job *jobs.Job[echoPayload]) (echoResult, error) {
	return echoResult{Text: job.Payload.Text, Secret: "private-" + job.Payload.Text}, nil
}

func TestRegisterRefusals(t *testing.T) {
	t.Parallel()
	h := echo
	tests := []struct {
		name string
		do   func(reg *jobs.Registry) error
		want error
	}{
		{"empty kind", func(reg *jobs.Registry) error { _, err := jobs.Register(reg, "", h, nil); return err }, jobs.ErrInvalidKind},
		{"upper-case kind", func(reg *jobs.Registry) error { _, err := jobs.Register(reg, "Email", h, nil); return err }, jobs.ErrInvalidKind},
		{"kind with space", func(reg *jobs.Registry) error { _, err := jobs.Register(reg, "a b", h, nil); return err }, jobs.ErrInvalidKind},
		{"nil handler", func(reg *jobs.Registry) error {
			_, err := jobs.Register[echoPayload, echoResult](reg, "echo", nil, nil)
			return err
		}, jobs.ErrNilHandler},
		{"nil HandlerFunc", func(reg *jobs.Registry) error {
			var f func(context.Context, *jobs.Job[echoPayload]) (echoResult, error)
			_, err := jobs.Register(reg, "echo", f, nil)
			return err
		}, jobs.ErrNilHandler},
		{"twice", func(reg *jobs.Registry) error {
			if _, err := jobs.Register(reg, "echo", h, nil); err != nil {
				return err
			}
			_, err := jobs.Register(reg, "echo", h, nil)
			return err
		}, jobs.ErrDuplicateKind},
		{"reserved code", func(reg *jobs.Registry) error {
			_, err := jobs.Register(reg, "echo", h, &jobs.KindOpts{FailureCodes: []string{jobs.CodeTimedOut}})
			return err
		}, jobs.ErrInvalidCode},
		{"code not snake case", func(reg *jobs.Registry) error {
			_, err := jobs.Register(reg, "echo", h, &jobs.KindOpts{FailureCodes: []string{"Bad-Code"}})
			return err
		}, jobs.ErrInvalidCode},
		{"code too long", func(reg *jobs.Registry) error {
			_, err := jobs.Register(reg, "echo", h, &jobs.KindOpts{FailureCodes: []string{"a234567890123456789012345678901234567890123456789012345678901234x"}})
			return err
		}, jobs.ErrInvalidCode},
		{"after use by Validate", func(reg *jobs.Registry) error {
			_ = reg.Validate("anything", []byte(`{}`))
			_, err := jobs.Register(reg, "echo", h, nil)
			return err
		}, jobs.ErrRegistryFrozen},
		{"after use by a worker", func(reg *jobs.Registry) error {
			if _, err := testroles.Worker(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil)}); err != nil {
				return err
			}
			_, err := jobs.Register(reg, "echo", h, nil)
			return err
		}, jobs.ErrRegistryFrozen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := jobs.NewRegistry()
			if err := tt.do(reg); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestRegisterAccepts(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	if _, err := jobs.Register(reg, "email.send_v2", echo, &jobs.KindOpts{FailureCodes: []string{"bounced", "rate_limited"}}); err != nil {
		t.Fatal(err)
	}
	codes, err := reg.Codes("email.send_v2")
	if err != nil || len(codes) != 2 || codes[0] != "bounced" || codes[1] != "rate_limited" {
		t.Fatalf("Codes = %v, %v", codes, err)
	}
	if got := reg.Kinds(); len(got) != 1 || got[0] != "email.send_v2" {
		t.Fatalf("Kinds = %v", got)
	}
}

func TestMustRegisterPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("MustRegister with an empty kind did not panic")
		}
	}()
	jobs.MustRegister(jobs.NewRegistry(), "", echo, nil)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	if err := reg.Validate("nope", []byte(`{}`)); !errors.Is(err, jobs.ErrUnknownKind) {
		t.Fatalf("unknown kind: got %v", err)
	}
	if err := reg.Validate("echo", []byte(`{"text":"hi","extra":1}`)); !errors.Is(err, jobs.ErrInvalidPayload) {
		t.Fatalf("unknown field: got %v", err)
	}
	if err := reg.Validate("echo", []byte(`{"text":"hi"}`)); err != nil {
		t.Fatalf("valid payload: %v", err)
	}
}
