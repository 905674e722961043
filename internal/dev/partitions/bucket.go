package partitions

import "time"

// bucket is one partition key value's budget of one kind of unit (write
// or read): a token bucket that refills at rate units per second of the
// model's clock and holds at most capacity units: one second of budget at
// full scale, as DynamoDB gives each partition at most about 1,000 write
// and 3,000 read units a second whatever the table's capacity (on demand
// or provisioned, burst or not). At scale k a second of the service is 1/k
// seconds of the run (see Model.window), so the bucket holds 1,000 (or
// 3,000) units and refills at k times that.
//
// A write of u units is accepted when the bucket holds min(u, capacity)
// units (so that an item bigger than the whole budget can still be
// written, once the bucket is full) and takes them, which may leave the
// bucket below zero: the next ones wait for the refill. A read is accepted
// when the bucket is not empty and pays afterwards, when its size is known.
//
// A bucket that starts full and is drained by a steady stream accepts rate
// units a second; in its first window of a burst it can accept up to twice
// its capacity (its content, then a window of refill), as a real
// partition's short burst allowance does. rate 0 is no limit.
type bucket struct {
	tokens float64
	last   time.Time
	primed bool
}

func (b *bucket) refill(now time.Time, rate, capacity float64) {
	if !b.primed {
		b.tokens, b.last, b.primed = capacity, now, true
		return
	}
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = min(capacity, b.tokens+dt*rate)
		b.last = now
	}
}

// allows reports whether the bucket accepts a write of units now.
func (b *bucket) allows(now time.Time, rate, capacity, units float64) bool {
	if rate <= 0 {
		return true
	}
	b.refill(now, rate, capacity)
	return b.tokens >= min(units, capacity)
}

// open reports whether the bucket accepts a read now (it is not empty).
func (b *bucket) open(now time.Time, rate, capacity float64) bool {
	if rate <= 0 {
		return true
	}
	b.refill(now, rate, capacity)
	return b.tokens > 0
}

// take spends units (a refund is negative).
func (b *bucket) take(now time.Time, rate, capacity, units float64) {
	if rate <= 0 {
		return
	}
	b.refill(now, rate, capacity)
	b.tokens = min(capacity, b.tokens-units)
}

// meter counts the units a key accepted, per window of the model's clock
// (one second of the service: Model.window): the window's sum, the highest
// sum, the total.
type meter struct {
	sec         int64
	cur, peak   float64
	peakSec     int64
	total       float64
	requests    int
	refused     int
	refusedUnit float64
}

func (m *meter) add(sec int64, units float64) {
	if sec != m.sec {
		m.sec, m.cur = sec, 0
	}
	m.cur += units
	m.total += units
	if m.cur > m.peak {
		m.peak, m.peakSec = m.cur, sec
	}
}
