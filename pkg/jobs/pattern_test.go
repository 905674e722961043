package jobs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// The name and code checks accept exactly what the counted patterns they
// replace accepted (a counted repetition is slow to compile at start).
func TestChecksMatchTheCountedPatterns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		check func(string) bool
		was   *regexp.Regexp
	}{
		{"code", validCode, regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)},
		{"kind", validKind, regexp.MustCompile(`^[a-z][a-z0-9_.\-]{0,99}$`)},
		{"runtime schedule", func(s string) bool { return len(s) <= 47 && runtimeName.MatchString(s) }, regexp.MustCompile(`^[A-Za-z0-9_.-]{1,47}$`)},
		{"declared schedule", func(s string) bool {
			return driver.Schedule{Name: s, Expression: "rate(5 minutes)"}.Check() == nil
		}, regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, head := range []string{"", "a", "A", "0", "_", ".", "é", " "} {
				for _, fill := range []string{"a", "z9", "_", ".", "-", "A", "é", "/"} {
					for n := 0; n <= 110; n++ {
						s := head + strings.Repeat(fill, n)
						if got, want := tt.check(s), tt.was.MatchString(s); got != want {
							t.Fatalf("%q (%d bytes): got %v, want %v", s, len(s), got, want)
						}
					}
				}
			}
		})
	}
}
