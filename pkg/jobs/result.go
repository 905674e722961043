package jobs

import "encoding/json"

// Result is what a handler returns (and what it publishes as a partial
// result). PublicJSON states exactly what of it is public: only those bytes
// are stored and returned by the API, so a result can carry private fields
// that never leave the handler. The bytes must be one valid JSON value of at
// most [MaxResultBytes]; otherwise the job fails with [CodeInternal] or
// [CodeResultTooLarge].
type Result interface {
	PublicJSON() ([]byte, error)
}

// NoResult is the Result of a kind that has nothing to report. Its public
// JSON is null.
type NoResult struct{}

// PublicJSON returns null.
func (NoResult) PublicJSON() ([]byte, error) { return []byte("null"), nil }

// JSON is a Result whose whole value is public: its public JSON is
// json.Marshal of V. Use it for results with nothing to hide.
type JSON[T any] struct{ V T }

// PublicJSON returns json.Marshal(r.V).
func (r JSON[T]) PublicJSON() ([]byte, error) { return json.Marshal(r.V) }
