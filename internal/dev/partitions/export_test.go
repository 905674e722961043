package partitions

import (
	"context"
	"time"
)

// HoldWith replaces how the model holds a transaction's items (tests hold
// them until they say so). Call it before the model serves a transaction.
func HoldWith(m *Model, hold func(ctx context.Context, d time.Duration)) { m.wait = hold }

// Forget makes the model doubt what it knows of the item whose id is id,
// as after a write of it that failed without saying whether it landed.
func Forget(m *Model, id string) {
	k, _, err := m.schema.itemKey(item{"id": &value{t: "S", s: id}})
	if err != nil {
		panic(err)
	}
	m.shadowOf(k).forget()
}
