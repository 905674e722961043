package wire

import "unicode"

const (
	// MaxOwnerBytes is the longest owner name stored with a job.
	MaxOwnerBytes = 512
	// MaxIdempotencyKeyBytes is the longest idempotency key accepted.
	MaxIdempotencyKeyBytes = 255
)

// ValidOwner reports whether owner can own jobs: 1 to MaxOwnerBytes
// printable ASCII characters.
func ValidOwner(owner string) bool {
	return owner != "" && len(owner) <= MaxOwnerBytes && PrintableASCII(owner)
}

// PrintableASCII reports whether s holds only printable ASCII characters.
func PrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] > unicode.MaxASCII || !unicode.IsPrint(rune(s[i])) {
			return false
		}
	}
	return true
}
