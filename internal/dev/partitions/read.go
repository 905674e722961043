package partitions

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// readUnits is the read units of size bytes read: 1 per 4 KB, rounded up,
// at least 1; half that for an eventually consistent read.
func readUnits(size int, consistent bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/4096))
	if !consistent {
		u /= 2
	}
	return u
}

// openLocked reports whether the key's read bucket is not empty, and
// counts a refusal if it is. m.mu is held.
func (m *Model) openLocked(pk partKey) bool {
	ks := m.keyLocked(pk)
	if ks.rb.open(m.clock.Now(), m.limits.ReadUnitsPerSecond, m.capacity(m.limits.ReadUnitsPerSecond)) {
		return true
	}
	ks.r.refused++
	m.stats.throttled++
	return false
}

// readLocked charges a read that was answered. m.mu is held.
func (m *Model) readLocked(pk partKey, u float64) {
	now := m.clock.Now()
	ks := m.keyLocked(pk)
	ks.rb.take(now, m.limits.ReadUnitsPerSecond, m.capacity(m.limits.ReadUnitsPerSecond), u)
	ks.r.add(m.sec(now), u)
	ks.r.requests++
}

// whole reports whether a read returns whole items.
func whole(f map[string]json.RawMessage) bool {
	_, p := f["ProjectionExpression"]
	_, a := f["AttributesToGet"]
	sel := str(f["Select"])
	return !p && !a && (sel == "" || sel == "ALL_ATTRIBUTES")
}

// knownSize is the size of an item the model knows, when a read returned
// only part of it (DynamoDB charges the whole item).
func (m *Model) knownSize(itemKey string, fallback int) int {
	m.mu.Lock()
	sh := m.items[itemKey]
	m.mu.Unlock()
	if sh == nil || !sh.mu.TryLock() {
		return fallback
	}
	defer sh.mu.Unlock()
	if sh.known {
		return max(fallback, sh.it.size())
	}
	return fallback
}

// getItem models GetItem: refused when the item's key has no read units
// left, charged by the size of what it read.
func (m *Model) getItem(r *http.Request, body []byte) *answer {
	f, err := requestFields(body)
	if err != nil || str(f["TableName"]) != m.schema.table {
		return m.forwardOrFail(r, body)
	}
	key, err := decodeItem(f["Key"])
	if err != nil {
		return m.refuse("GetItem", fmt.Errorf("%w: Key: %v", ErrUnsupported, err))
	}
	itemKey, hash, err := m.schema.itemKey(key)
	if err != nil {
		return m.refuse("GetItem", err)
	}
	pk := partKey{"", hash}
	m.mu.Lock()
	open := m.openLocked(pk)
	m.mu.Unlock()
	if !open {
		return m.throttled(pk, false)
	}
	a, err := m.forward(r, body)
	if err != nil {
		return unreachable(err)
	}
	if a.status != http.StatusOK {
		return a
	}
	var out struct{ Item json.RawMessage }
	_ = json.Unmarshal(a.body, &out)
	it, _ := decodeItem(out.Item)
	size := it.size()
	if !whole(f) {
		size = m.knownSize(itemKey, size)
	}
	m.mu.Lock()
	m.readLocked(pk, readUnits(size, boolean(f["ConsistentRead"])))
	m.mu.Unlock()
	if whole(f) {
		m.learn(it)
	}
	return a
}

// batchGet models BatchGetItem: each key is refused on its own and comes
// back in UnprocessedKeys, as DynamoDB does; the call is refused with
// ProvisionedThroughputExceededException only when every key was.
func (m *Model) batchGet(r *http.Request, body []byte) *answer {
	f, err := requestFields(body)
	if err != nil {
		return m.forwardOrFail(r, body)
	}
	var reqs map[string]map[string]json.RawMessage
	if err := json.Unmarshal(f["RequestItems"], &reqs); err != nil {
		return m.forwardOrFail(r, body)
	}
	ours, ok := reqs[m.schema.table]
	if !ok {
		return m.forwardOrFail(r, body)
	}
	var keys []json.RawMessage
	if err := json.Unmarshal(ours["Keys"], &keys); err != nil {
		return m.refuse("BatchGetItem", fmt.Errorf("%w: Keys: %v", ErrUnsupported, err))
	}
	type want struct {
		raw     json.RawMessage
		itemKey string
		pk      partKey
	}
	var kept, refused []want
	m.mu.Lock()
	for _, raw := range keys {
		key, err := decodeItem(raw)
		if err != nil {
			m.mu.Unlock()
			return m.refuse("BatchGetItem", fmt.Errorf("%w: Keys: %v", ErrUnsupported, err))
		}
		itemKey, hash, err := m.schema.itemKey(key)
		if err != nil {
			m.mu.Unlock()
			return m.refuse("BatchGetItem", err)
		}
		w := want{raw, itemKey, partKey{"", hash}}
		if m.openLocked(w.pk) {
			kept = append(kept, w)
		} else {
			refused = append(refused, w)
		}
	}
	m.mu.Unlock()
	rawKeys := func(ws []want) json.RawMessage {
		out := make([]json.RawMessage, len(ws))
		for i, w := range ws {
			out[i] = w.raw
		}
		b, _ := json.Marshal(out)
		return b
	}
	if len(kept) == 0 {
		delete(reqs, m.schema.table)
	} else {
		fwdOurs := map[string]json.RawMessage{}
		for k, v := range ours {
			fwdOurs[k] = v
		}
		fwdOurs["Keys"] = rawKeys(kept)
		reqs[m.schema.table] = fwdOurs
	}
	if len(reqs) == 0 {
		return m.throttled(refused[0].pk, false)
	}
	f["RequestItems"], _ = json.Marshal(reqs)
	fwd, _ := json.Marshal(f)
	a, err := m.forward(r, fwd)
	if err != nil {
		return unreachable(err)
	}
	if a.status != http.StatusOK {
		return a
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(a.body, &out); err != nil {
		return a
	}
	var responses map[string][]json.RawMessage
	_ = json.Unmarshal(out["Responses"], &responses)
	sizes := map[string]int{}
	for _, raw := range responses[m.schema.table] {
		it, err := decodeItem(raw)
		if err != nil || it == nil {
			continue
		}
		k, _, err := m.schema.itemKey(it)
		if err != nil {
			continue
		}
		sizes[k] = it.size()
		if whole(ours) {
			m.learn(it)
		}
	}
	consistent := boolean(ours["ConsistentRead"])
	for _, w := range kept {
		size := sizes[w.itemKey]
		if !whole(ours) {
			size = m.knownSize(w.itemKey, size)
		}
		m.mu.Lock()
		m.readLocked(w.pk, readUnits(size, consistent))
		m.mu.Unlock()
	}
	if len(refused) > 0 {
		var un map[string]map[string]json.RawMessage
		_ = json.Unmarshal(out["UnprocessedKeys"], &un)
		if un == nil {
			un = map[string]map[string]json.RawMessage{}
		}
		back := map[string]json.RawMessage{}
		for k, v := range ours {
			back[k] = v
		}
		var again []want
		if prev, ok := un[m.schema.table]; ok {
			var ks []json.RawMessage
			_ = json.Unmarshal(prev["Keys"], &ks)
			for _, k := range ks {
				again = append(again, want{raw: k})
			}
		}
		back["Keys"] = rawKeys(append(again, refused...))
		un[m.schema.table] = back
		out["UnprocessedKeys"], _ = json.Marshal(un)
		a.body, _ = json.Marshal(out)
	}
	return a
}

// query models Query: the partition is the key condition's partition key
// value, of the table or of the index; refused when that key has no read
// units left, charged what DynamoDB Local reports it read (at least half a
// unit, or one for a strongly consistent query).
func (m *Model) query(r *http.Request, body []byte) *answer {
	f, err := requestFields(body)
	if err != nil || str(f["TableName"]) != m.schema.table {
		return m.forwardOrFail(r, body)
	}
	indexName := str(f["IndexName"])
	hashKey, projection := m.schema.hashKey, types.ProjectionTypeAll
	if indexName != "" {
		ix, ok := m.schema.indexByName[indexName]
		if !ok {
			return m.forwardOrFail(r, body) // DynamoDB Local refuses it
		}
		hashKey, projection = ix.hashKey, ix.projection
	}
	names, values, err := expressionMaps(f)
	if err != nil {
		return m.refuse("Query", fmt.Errorf("%w: %v", ErrUnsupported, err))
	}
	var pv *value
	if kce := str(f["KeyConditionExpression"]); kce != "" {
		if pv, err = partitionValue(kce, hashKey, names, values); err != nil {
			return m.refuse("Query", err)
		}
	} else {
		var legacy map[string]struct {
			ComparisonOperator string
			AttributeValueList []*value
		}
		_ = json.Unmarshal(f["KeyConditions"], &legacy)
		c, ok := legacy[hashKey]
		if !ok || c.ComparisonOperator != "EQ" || len(c.AttributeValueList) != 1 {
			return m.refuse("Query", fmt.Errorf("%w: a query without %s = value", ErrUnsupported, hashKey))
		}
		pv = c.AttributeValueList[0]
	}
	ks, ok := pv.keyString()
	if !ok {
		return m.refuse("Query", fmt.Errorf("%w: partition key value of type %s", ErrUnsupported, pv.t))
	}
	pk := partKey{indexName, ks}
	m.mu.Lock()
	open := m.openLocked(pk)
	m.mu.Unlock()
	if !open {
		return m.throttled(pk, false)
	}
	asked := askCapacity(f)
	fwd, _ := json.Marshal(f)
	a, err := m.forward(r, fwd)
	if err != nil {
		return unreachable(err)
	}
	if a.status != http.StatusOK {
		return a
	}
	c := m.consumedOf(a.body)
	u := c.table
	if indexName != "" {
		u = c.indexes[indexName]
	}
	consistent := boolean(f["ConsistentRead"]) && indexName == ""
	m.mu.Lock()
	m.readLocked(pk, math.Max(u, readUnits(0, consistent)))
	m.mu.Unlock()
	if projection == types.ProjectionTypeAll && whole(f) {
		var out struct{ Items []json.RawMessage }
		_ = json.Unmarshal(a.body, &out)
		for _, raw := range out.Items {
			if it, err := decodeItem(raw); err == nil {
				m.learn(it)
			}
		}
	}
	asked.shape(a)
	return a
}
