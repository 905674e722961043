package schedulerapi

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a goroutine a test started outlives it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
