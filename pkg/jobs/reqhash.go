package jobs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"strings"
	"time"
)

// Request hashes.
//
// A job (and a batch) stores a hash of the request that made it, so that a
// retry with the same idempotency key can be told from a different request
// without storing the request twice. The hash covers the kind, the
// canonical payload and the schedule as requested (run_at, or delay: not the
// time it was turned into, which differs from one retry to the next).
//
// With an AESSealer the hash is an HMAC, so the hash of a payload with
// secret fields does not help guess them. Keys rotate: the sealer seals with
// its first key and opens with all, and new hashes use its LAST key, the
// oldest, which a rotation (a new key put first) does not change. A stored
// hash names its key ("<key id>.<hex>"), and is checked with that key as
// long as the ring holds it, so an identical retry matches after a rotation
// and across a rolling deploy where old and new instances hold different
// rings. Hashes stored before key ids (bare hex) are checked with every key.

// hashKeys are the keys of request hashes.
type hashKeys struct {
	current string            // id of the key new hashes use; "" unkeyed
	byID    map[string][]byte // every key that checks a stored hash
}

// requestHasher makes and checks request hashes.
type requestHasher struct{ keys hashKeys }

// HashKeyer is a Sealer of your own that also keys request hashes: with
// secret payload fields the stored hash of a request must be keyed, or a
// low-entropy secret could be guessed from it. The key must be secret, at
// least 32 bytes, and stable across deploys. AESSealer keys its own.
type HashKeyer interface {
	RequestHashKey() []byte
}

func newRequestHasher(s Sealer) requestHasher {
	switch hk := s.(type) {
	case interface{ hashKeys() hashKeys }:
		return requestHasher{keys: hk.hashKeys()}
	case HashKeyer:
		key := hk.RequestHashKey()
		sum := sha256.Sum256(key)
		id := hex.EncodeToString(sum[:4])
		return requestHasher{keys: hashKeys{current: id, byID: map[string][]byte{id: key}}}
	}
	return requestHasher{}
}

// keyed reports whether s keys request hashes.
func keyed(s Sealer) bool {
	switch hk := s.(type) {
	case interface{ hashKeys() hashKeys }:
		return true
	case HashKeyer:
		return len(hk.RequestHashKey()) >= 32
	}
	return false
}

// request is what a request hash covers, in order.
type request [][]byte

// jobRequest is the request of one job.
func jobRequest(kind string, canonical []byte, runAt time.Time, delay time.Duration) request {
	var sched string
	switch {
	case delay > 0:
		sched = "delay=" + delay.String()
	case !runAt.IsZero():
		sched = "run_at=" + runAt.UTC().Format(time.RFC3339Nano)
	}
	return request{[]byte(kind), canonical, []byte(sched)}
}

func (r request) write(h hash.Hash) {
	var n [8]byte
	for _, part := range r {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
}

func (h requestHasher) sumWith(id string, key []byte, r request) string {
	var m hash.Hash
	if key == nil {
		m = sha256.New()
	} else {
		m = hmac.New(sha256.New, key)
	}
	r.write(m)
	sum := hex.EncodeToString(m.Sum(nil)[:16])
	if id == "" {
		return sum
	}
	return id + "." + sum
}

// sum is the hash to store for r.
func (h requestHasher) sum(r request) string {
	return h.sumWith(h.keys.current, h.keys.byID[h.keys.current], r)
}

// matches reports whether stored is the hash of r, made with any key of the
// ring.
func (h requestHasher) matches(stored string, r request) bool {
	if stored == "" {
		return false
	}
	if id, _, ok := strings.Cut(stored, "."); ok {
		key, known := h.keys.byID[id]
		return known && hmac.Equal([]byte(stored), []byte(h.sumWith(id, key, r)))
	}
	if len(h.keys.byID) == 0 {
		return hmac.Equal([]byte(stored), []byte(h.sumWith("", nil, r))) || hmac.Equal([]byte(stored), []byte(legacySum(nil, r)))
	}
	for _, key := range h.keys.byID {
		if hmac.Equal([]byte(stored), []byte(legacySum(key, r))) {
			return true
		}
	}
	return false
}

// legacySum is a job's hash as stored before key ids and schedules were
// part of it: kind, NUL, payload.
func legacySum(key []byte, r request) string {
	if len(r) != 3 || len(r[2]) != 0 {
		return ""
	}
	var m hash.Hash
	if key == nil {
		m = sha256.New()
	} else {
		m = hmac.New(sha256.New, key)
	}
	m.Write(r[0])
	m.Write([]byte{0})
	m.Write(r[1])
	return hex.EncodeToString(m.Sum(nil)[:16])
}
