package testenv_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
)

// Goroutines write to a SyncBuffer while the test reads it (-race checks
// it); every write is kept whole, and Tail is the end of what was written.
func TestSyncBufferTakesWritesFromGoroutines(t *testing.T) {
	var b testenv.SyncBuffer
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				fmt.Fprintf(&b, "g%d-%03d\n", g, i)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for _, l := range lines {
		if len(l) != len("g0-000") {
			t.Fatalf("a torn line: %q", l)
		}
	}
	if got, want := b.Tail(7), b.String()[len(b.String())-7:]; got != want {
		t.Fatalf("Tail(7) = %q, want %q", got, want)
	}
	if got := b.Tail(1 << 20); got != b.String() {
		t.Fatalf("Tail of more than was written: %d bytes, want all %d", len(got), len(b.String()))
	}
}
