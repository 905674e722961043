// Package ids checks the form of job ids.
package ids

import (
	"strings"

	"github.com/google/uuid"
)

// Valid reports whether id has the form of a job id: a UUID in canonical
// lower-case form.
func Valid(id string) bool {
	if len(id) != 36 || strings.ToLower(id) != id {
		return false
	}
	_, err := uuid.Parse(id)
	return err == nil
}
