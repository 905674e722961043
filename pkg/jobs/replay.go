package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// ReplayRequest asks Service.Replay for a new job made from one of the
// owner's jobs (POST /v1/jobs/{id}/replay).
type ReplayRequest struct {
	Owner string
	// ID is the job to replay: any of the owner's jobs, in any status.
	ID string
	// Payload, when set, replaces the job's payload (validated as an
	// enqueue's). A jobs:"secret" field given as "[secret]", as
	// GET /v1/jobs/{id} shows it, keeps the old job's value.
	Payload json.RawMessage
	// EnqueueOpts are the new job's, as an enqueue's; its lane, tenant
	// and tags are the old job's unless given. The new job does not inherit the
	// old one's idempotency key, unique key, schedule or parents.
	EnqueueOpts
}

// Replay enqueues a new job of the old job's kind and owner, with its
// payload (or req.Payload), and returns it: its View.ReplayOf names the
// old job. The old job is left as it is. ErrNotFound as for reads; the
// errors of Enqueue otherwise (the kind must still be registered, the
// payload must still decode into its type).
func (s *Service) Replay(ctx context.Context, req ReplayRequest) (*EnqueueResult, error) {
	old, err := s.get(ctx, req.Owner, req.ID)
	if err != nil {
		return nil, err
	}
	k, ok := s.reg.lookupFor(old.Kind, s.callers)
	if !ok {
		return nil, errUnknownKind
	}
	stored, err := s.eng.payloadOf(ctx, old)
	if errors.Is(err, driver.ErrPartMissing) {
		return nil, refuse(CodeInvalidPayload, "the job's stored payload is gone (its item expired)")
	}
	if err != nil {
		return nil, err
	}
	payload, err := openPayload(s.sealer, old.ID, k.secrets, stored)
	if err != nil {
		return nil, refuse(CodeInvalidPayload, "the job's stored payload cannot be read with this deployment's keys")
	}
	if len(req.Payload) > 0 {
		if payload, err = keepSecrets(req.Payload, payload, k.secrets); err != nil {
			return nil, err
		}
	}
	opts := req.EnqueueOpts
	if opts.Lane == "" && old.Lane != k.lane {
		opts.Lane = old.Lane
	}
	if opts.Tenant == "" {
		opts.Tenant = old.Tenant
	}
	if opts.Tags == nil {
		opts.Tags = old.Tags
	}
	if opts.UniqueKey != "" {
		return nil, refuse(codeInvalidRequest, `a replay cannot take a "unique_key"`)
	}
	return s.enqueueResult(ctx, EnqueueRequest{Owner: req.Owner, Kind: old.Kind, Payload: payload, EnqueueOpts: opts, replayOf: old.ID})
}

// keepSecrets returns edited with each secret field given as the mask
// ("[secret]") set to its value in the old payload.
func keepSecrets(edited, old json.RawMessage, secrets []string) (json.RawMessage, error) {
	if len(secrets) == 0 {
		return edited, nil
	}
	var obj, was map[string]json.RawMessage
	if json.Unmarshal(edited, &obj) != nil || obj == nil {
		return edited, nil // not an object: the kind's decoder says what is wrong
	}
	// The payload's own field names, matched to the secret ones as Go's
	// decoder matches them (case-insensitively).
	name := func(f string) string {
		for k := range obj {
			if strings.EqualFold(k, f) {
				return k
			}
		}
		return f
	}
	masked := false
	for _, f := range secrets {
		if string(obj[name(f)]) == `"`+secretMask+`"` {
			masked = true
		}
	}
	if !masked {
		return edited, nil
	}
	if err := json.Unmarshal(old, &was); err != nil {
		return nil, fmt.Errorf("jobs: replay: the old payload: %w", err)
	}
	for _, f := range secrets {
		k := name(f)
		if string(obj[k]) != `"`+secretMask+`"` {
			continue
		}
		if v, ok := was[f]; ok {
			obj[k] = v
		} else {
			delete(obj, k)
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// replayRequest is the part of a replay's request hash that names the job
// it replays.
func replayRequest(replayOf string) []byte {
	if replayOf == "" {
		return nil
	}
	return []byte("replay_of=" + replayOf)
}
