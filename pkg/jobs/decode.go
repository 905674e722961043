package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lambdajobs/lambdajobs/internal/jsonin"
)

// PayloadError says why a payload was refused. Its message describes only
// the shape of the caller's own input, so it is safe to return to the caller.
type PayloadError struct {
	Reason string
	// Limit, when set, is the kind's KindOpts.MaxPayloadBytes, which the
	// payload passes (HTTP 413 too_large).
	Limit int
}

func (e *PayloadError) Error() string { return "invalid payload: " + e.Reason }

// ErrInvalidPayload matches every *PayloadError with errors.Is.

// Is reports whether target is ErrInvalidPayload.
func (e *PayloadError) Is(target error) bool {
	return target == ErrInvalidPayload || target == ErrInvalidRequest
}

func payloadErr(format string, args ...any) error {
	return &PayloadError{Reason: fmt.Sprintf(format, args...)}
}

// checkJSON is jsonin.Check with the refusal as a *PayloadError.
func checkJSON(raw []byte, maxBytes int) error {
	var e *jsonin.Error
	if err := jsonin.Check(raw, maxBytes); errors.As(err, &e) {
		return &PayloadError{Reason: e.Reason}
	}
	return nil
}

// decodePayload decodes raw strictly into a P: raw must pass the checks of outside JSON
// with maxBytes (its kind's KindOpts.MaxPayloadBytes), must not be null, and must not carry fields that P
// does not have. The same function runs at enqueue and again before a
// handler runs, so a job that was accepted decodes the same way later.
func decodePayload[P any](raw []byte, maxBytes int) (P, error) {
	var p P
	if len(raw) > maxBytes {
		return p, &PayloadError{Reason: fmt.Sprintf("%d bytes is more than the %d allowed", len(raw), maxBytes), Limit: maxBytes}
	}
	if err := checkJSON(raw, maxBytes); err != nil {
		return p, err
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return p, payloadErr("payload is null")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, payloadErr("%s", jsonin.Reason(err))
	}
	return p, nil
}

// canonicalPayload returns the stored form of a payload that passed
// decodePayload: the payload decoded into P (numbers in interface fields
// kept exactly) and encoded again, so the HTTP path, the Go path and a
// retry with reordered keys store the same bytes and the same request hash.
func canonicalPayload[P any](raw []byte, maxBytes int) ([]byte, error) {
	var p P
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return nil, payloadErr("%s", jsonin.Reason(err))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, payloadErr("does not encode back to JSON")
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	if len(out) > maxBytes {
		return nil, &PayloadError{Reason: fmt.Sprintf("%d bytes once encoded is more than the %d allowed", len(out), maxBytes), Limit: maxBytes}
	}
	return out, nil
}
