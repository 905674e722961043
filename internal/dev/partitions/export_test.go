package partitions

import (
	"context"
	"time"
)

// HoldWith replaces how the model holds a transaction's items (tests hold
// them until they say so). Call it before the model serves a transaction.
func HoldWith(m *Model, hold func(ctx context.Context, d time.Duration)) { m.wait = hold }
