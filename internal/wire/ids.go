package wire

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// NewID returns a new job id: a UUIDv7, so ids sort by creation time.
func NewID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// IDTime is when the UUIDv7 id was made (by NewID, on the wall clock);
// false for an id of another version.
func IDTime(id string) (time.Time, bool) {
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 {
		return time.Time{}, false
	}
	sec, nsec := u.Time().UnixTime()
	return time.Unix(sec, nsec), true
}

// DerivedID returns the job id for a name that must always map to the same
// job, such as an owner's idempotency key or a foreign message's id: a
// UUIDv8 made from SHA-256 of the namespace and parts. Distinct inputs give
// distinct ids; the same inputs always give the same id.
func DerivedID(namespace string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(namespace))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	var u uuid.UUID
	copy(u[:], h.Sum(nil))
	u[6] = (u[6] & 0x0f) | 0x80 // version 8
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 9562 variant
	return u.String()
}

// ValidID reports whether id has the form of a job id: a UUID in canonical
// lower-case form.

// BatchJobID returns the id of the i-th job of the batch batchID.
func BatchJobID(batchID string, i int) string { return DerivedID("batch-job", batchID, fmt.Sprint(i)) }

// CompletionJobID is the id of the completion job of the batch batchID.
func CompletionJobID(batchID string) string { return DerivedID("batch-completion", batchID) }

// ValidID reports whether id has the form of a job id: a UUID in canonical
// lower-case form.
func ValidID(id string) bool {
	if len(id) != 36 || strings.ToLower(id) != id {
		return false
	}
	_, err := uuid.Parse(id)
	return err == nil
}
