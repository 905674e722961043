package partitions

import (
	"testing"
	"testing/synctest"
	"time"
)

// A key's bucket accepts one second of units, then refuses until time
// refills it; it never holds more than one second.
func TestBucketHoldsOneSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b bucket
		const rate = 10.0
		accepted := 0
		for range 25 {
			if b.allows(time.Now(), rate, rate, 1) {
				b.take(time.Now(), rate, rate, 1)
				accepted++
			}
		}
		if accepted != 10 {
			t.Fatalf("a full bucket accepted %d writes of 1 unit, want 10", accepted)
		}
		time.Sleep(300 * time.Millisecond) // fake time: 3 units come back
		accepted = 0
		for range 25 {
			if b.allows(time.Now(), rate, rate, 1) {
				b.take(time.Now(), rate, rate, 1)
				accepted++
			}
		}
		if accepted != 3 {
			t.Fatalf("after 300 ms: accepted %d, want 3", accepted)
		}
		time.Sleep(time.Hour) // an idle key saves no more than a second
		if !b.allows(time.Now(), rate, rate, rate) || b.tokens != rate {
			t.Fatalf("after an idle hour the bucket holds %g, want %g", b.tokens, rate)
		}
	})
}

// A write bigger than a second of budget is accepted by a full bucket
// and leaves it in debt; reads are refused only when the bucket is empty.
func TestBucketBigWritesAndReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b bucket
		if !b.allows(time.Now(), 2, 2, 5) {
			t.Fatal("a full bucket refused a write bigger than its second")
		}
		b.take(time.Now(), 2, 2, 5) // 2 - 5 = -3
		time.Sleep(time.Second)     // -1
		if b.open(time.Now(), 2, 2) {
			t.Fatalf("a bucket in debt (%g) accepts a read", b.tokens)
		}
		time.Sleep(600 * time.Millisecond) // 0.2
		if !b.open(time.Now(), 2, 2) {
			t.Fatalf("a bucket with %g units refuses a read", b.tokens)
		}
		var free bucket
		for range 1000 {
			if !free.allows(time.Now(), 0, 0, 100) || !free.open(time.Now(), 0, 0) {
				t.Fatal("rate 0 is no limit")
			}
		}
	})
}

func TestMeterPeakPerSecond(t *testing.T) {
	var m meter
	for _, w := range []struct {
		sec   int64
		units float64
	}{{0, 1}, {0, 2}, {1, 5}, {1, 1}, {3, 2}} {
		m.add(w.sec, w.units)
	}
	if m.peak != 6 || m.peakSec != 1 || m.total != 11 {
		t.Fatalf("peak %g in second %d, total %g; want 6 in second 1, total 11", m.peak, m.peakSec, m.total)
	}
}
