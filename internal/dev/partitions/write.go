package partitions

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"time"
)

// write is one item a request writes (or checks, in a transaction), and
// what that costs.
type write struct {
	op      string // Put, Update, Delete, ConditionCheck
	key     item
	itemKey string
	hash    string // the table's partition key value
	put     item
	upd     *update
	tx      bool
	sh      *shadow

	// Planned from the item before the write.
	old, new item
	invalid  bool // DynamoDB refuses the update (errInvalid): nothing changes
	charges  []charge
}

// charge is write units taken from one key's bucket.
type charge struct {
	pk    partKey
	units float64
}

// parseWrite reads one write of the model's table from its request fields.
func (m *Model) parseWrite(op string, f map[string]json.RawMessage, tx bool) (*write, error) {
	w := &write{op: op, tx: tx}
	var err error
	switch op {
	case "Put":
		if w.put, err = decodeItem(f["Item"]); err != nil {
			return nil, fmt.Errorf("%w: Item: %v", ErrUnsupported, err)
		}
		w.key = m.schema.keyOf(w.put)
	case "Update", "Delete", "ConditionCheck":
		if w.key, err = decodeItem(f["Key"]); err != nil {
			return nil, fmt.Errorf("%w: Key: %v", ErrUnsupported, err)
		}
	default:
		return nil, fmt.Errorf("%w: write %s", ErrUnsupported, op)
	}
	if op == "Update" {
		if _, legacy := f["AttributeUpdates"]; legacy {
			return nil, fmt.Errorf("%w: AttributeUpdates (use an UpdateExpression)", ErrUnsupported)
		}
		names, values, err := expressionMaps(f)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		if w.upd, err = parseUpdate(str(f["UpdateExpression"]), names, values); err != nil {
			return nil, err
		}
	}
	if w.itemKey, w.hash, err = m.schema.itemKey(w.key); err != nil {
		return nil, err
	}
	return w, nil
}

// units is the write units of an item of size bytes: 1 per KB, rounded
// up, at least 1; twice that in a transaction.
func units(size int, tx bool) float64 {
	u := math.Max(1, math.Ceil(float64(size)/1024))
	if tx {
		u *= 2
	}
	return u
}

// plan computes the item after the write and the units it costs: the
// table's partition, and each index partition whose entry appears,
// disappears, moves (both partitions) or changes (a projected attribute).
// sh.mu is held and the shadow known.
func (m *Model) plan(w *write) error {
	w.old = w.sh.it
	switch w.op {
	case "Put":
		w.new = w.put
	case "Delete":
		w.new = nil
	case "ConditionCheck":
		w.new = w.old
	case "Update":
		n, err := w.upd.apply(w.old, w.key)
		switch {
		case errors.Is(err, errInvalid):
			w.invalid, w.new = true, w.old
		case err != nil:
			return fmt.Errorf("%w: %v", ErrUnsupported, err)
		default:
			w.new = n
		}
	}
	w.charges = []charge{{partKey{"", w.hash}, units(max(w.old.size(), w.new.size()), w.tx)}}
	if w.op == "ConditionCheck" || w.invalid {
		return nil
	}
	for i := range m.schema.indexes {
		ix := &m.schema.indexes[i]
		opk, osk, oe, oin := ix.entry(m.schema, w.old)
		npk, nsk, ne, nin := ix.entry(m.schema, w.new)
		if oin && nin && opk == npk && osk == nsk {
			if !oe.equal(ne) {
				w.charges = append(w.charges, charge{partKey{ix.name, npk}, units(max(oe.size(), ne.size()), w.tx)})
			}
			continue
		}
		if oin {
			w.charges = append(w.charges, charge{partKey{ix.name, opk}, units(oe.size(), w.tx)})
		}
		if nin {
			w.charges = append(w.charges, charge{partKey{ix.name, npk}, units(ne.size(), w.tx)})
		}
	}
	return nil
}

// sum adds up charges per key.
func sum(charges []charge) map[partKey]float64 {
	out := map[partKey]float64{}
	for _, c := range charges {
		out[c.pk] += c.units
	}
	return out
}

// reserveLocked takes the charges' units if every key's bucket allows
// its share; otherwise it takes nothing, counts the refusal on each key
// that refused and returns them. m.mu is held.
func (m *Model) reserveLocked(now time.Time, charges []charge) []partKey {
	per := sum(charges)
	var refused []partKey
	for pk, u := range per {
		if !m.keyLocked(pk).wb.allows(now, m.limits.WriteUnitsPerSecond, m.capacity(m.limits.WriteUnitsPerSecond), u) {
			refused = append(refused, pk)
		}
	}
	if len(refused) > 0 {
		for _, pk := range refused {
			ks := m.keyLocked(pk)
			ks.w.refused++
			ks.w.refusedUnit += per[pk]
		}
		m.stats.throttled++
		sort.Slice(refused, func(i, j int) bool { return refused[i].index+refused[i].key < refused[j].index+refused[j].key })
		return refused
	}
	for pk, u := range per {
		m.keyLocked(pk).wb.take(now, m.limits.WriteUnitsPerSecond, m.capacity(m.limits.WriteUnitsPerSecond), u)
	}
	return nil
}

// settleLocked records the charges that stood and gives back the units
// of those that did not (kept false). m.mu is held.
func (m *Model) settleLocked(now time.Time, charges []charge, kept func(c charge) bool) {
	sec := m.sec(now)
	for _, c := range charges {
		ks := m.keyLocked(c.pk)
		if kept(c) {
			ks.w.add(sec, c.units)
			ks.w.requests++
		} else {
			ks.wb.take(now, m.limits.WriteUnitsPerSecond, m.capacity(m.limits.WriteUnitsPerSecond), -c.units)
		}
	}
}

func all(charge) bool         { return true }
func none(charge) bool        { return false }
func tableOnly(c charge) bool { return c.pk.index == "" }

// checkCapacity compares the model's units with DynamoDB Local's
// ConsumedCapacity for the same writes.
func (m *Model) checkCapacity(op string, a *answer, charges []charge) {
	got := m.consumedOf(a.body)
	if !got.found {
		return
	}
	want := consumed{indexes: map[string]float64{}}
	for _, c := range charges {
		if c.pk.index == "" {
			want.table += c.units
		} else {
			want.indexes[c.pk.index] += c.units
		}
	}
	m.mu.Lock()
	m.stats.capacityChecks++
	m.mu.Unlock()
	same := want.table == got.table && len(want.indexes) == len(got.indexes)
	for k, v := range want.indexes {
		same = same && got.indexes[k] == v
	}
	if !same {
		m.mismatchf("%s: model table %g index %v, DynamoDB Local table %g index %v", op, want.table, want.indexes, got.table, got.indexes)
	}
}

// single models PutItem, UpdateItem and DeleteItem.
func (m *Model) single(r *http.Request, op string, body []byte) *answer {
	f, err := requestFields(body)
	if err != nil || str(f["TableName"]) != m.schema.table {
		return m.forwardOrFail(r, body)
	}
	w, err := m.parseWrite(op[:len(op)-len("Item")], f, false)
	if err != nil {
		return m.refuse(op, err)
	}
	// A transaction holds the item (checked again once the item is ours:
	// a transaction may have taken it meanwhile).
	held := func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.inflight[w.itemKey] == 0 {
			return false
		}
		m.stats.conflicts++
		m.keyLocked(partKey{"", w.hash}).conflicts++
		return true
	}
	if held() {
		return transactionConflict()
	}
	w.sh = m.shadowOf(w.itemKey)
	w.sh.mu.Lock()
	defer w.sh.mu.Unlock()
	if held() {
		return transactionConflict()
	}
	if err := m.load(r.Context(), w.sh, w.key); err != nil {
		return unreachable(err)
	}
	if err := m.plan(w); err != nil {
		return m.refuse(op, err)
	}
	m.mu.Lock()
	refused := m.reserveLocked(m.clock.Now(), w.charges)
	m.mu.Unlock()
	if refused != nil {
		return m.throttled(refused[0], true)
	}

	asked := askCapacity(f)
	rv := str(f["ReturnValues"])
	var drop []string
	if op == "UpdateItem" && (rv == "" || rv == "NONE") {
		f["ReturnValues"] = json.RawMessage(`"ALL_NEW"`)
		rv, drop = "ALL_NEW", []string{"Attributes"}
	}
	fwd, _ := json.Marshal(f)
	a, err := m.forward(r, fwd)
	now := m.clock.Now()
	m.mu.Lock()
	switch {
	case err != nil || a.status >= 500:
		m.settleLocked(now, w.charges, none)
		w.sh.forget()
	case a.status == http.StatusOK:
		m.settleLocked(now, w.charges, all)
	case a.errorType() == "ConditionalCheckFailedException":
		m.settleLocked(now, w.charges, tableOnly)
	default:
		m.settleLocked(now, w.charges, none)
	}
	m.mu.Unlock()
	if err != nil {
		return unreachable(err)
	}
	switch {
	case a.status == http.StatusOK:
		got := w.new
		if op == "UpdateItem" && rv == "ALL_NEW" {
			var out struct{ Attributes json.RawMessage }
			if json.Unmarshal(a.body, &out) == nil {
				if actual, err := decodeItem(out.Attributes); err == nil && actual != nil {
					if !actual.equal(w.new) {
						m.errorf("UpdateItem %q: the model expected the item %s, DynamoDB Local has %s", str(f["UpdateExpression"]), render(w.new), render(actual))
					}
					got = actual
				}
			}
		}
		w.sh.known, w.sh.it = true, got
		m.checkCapacity(op, a, w.charges)
	case a.errorType() == "ConditionalCheckFailedException":
		var out struct{ Item json.RawMessage }
		_ = json.Unmarshal(a.body, &out)
		it, derr := decodeItem(out.Item)
		switch {
		case derr == nil && it != nil:
			w.sh.known, w.sh.it = true, it
		case str(f["ReturnValuesOnConditionCheckFailure"]) == "ALL_OLD":
			w.sh.known, w.sh.it = true, nil
		}
	}
	asked.shape(a, drop...)
	return a
}

func render(it item) string {
	if it == nil {
		return "(none)"
	}
	b, _ := json.Marshal(it)
	return string(b)
}

// lockAll takes the writes' shadows in the order of their item keys.
func (m *Model) lockAll(ws []*write) (unlock func()) {
	byKey := map[string]*shadow{}
	for _, w := range ws {
		w.sh = m.shadowOf(w.itemKey)
		byKey[w.itemKey] = w.sh
	}
	keys := sortedKeys(byKey)
	for _, k := range keys {
		byKey[k].mu.Lock()
	}
	return func() {
		for _, k := range keys {
			byKey[k].mu.Unlock()
		}
	}
}

// transact models TransactWriteItems: items in flight, conflicts,
// throttling inside the transaction, doubled units.
func (m *Model) transact(r *http.Request, body []byte) *answer {
	f, err := requestFields(body)
	if err != nil {
		return m.forwardOrFail(r, body)
	}
	var items []map[string]map[string]json.RawMessage
	if err := json.Unmarshal(f["TransactItems"], &items); err != nil {
		return m.forwardOrFail(r, body)
	}
	ws := make([]*write, len(items)) // nil: another table's
	var mine []*write
	for i, ti := range items {
		for op, fields := range ti {
			if str(fields["TableName"]) != m.schema.table {
				continue
			}
			w, err := m.parseWrite(op, fields, true)
			if err != nil {
				return m.refuse("TransactWriteItems", err)
			}
			ws[i] = w
			mine = append(mine, w)
		}
	}
	token := str(f["ClientRequestToken"])
	m.mu.Lock()
	replay := token != "" && m.tokens[token]
	m.mu.Unlock()
	if replay {
		// The SDK's retry of a transaction that landed (its answer was
		// lost): DynamoDB answers it without writing again. Whatever
		// DynamoDB Local does with it, the model reads the items afresh.
		a := m.forwardOrFail(r, body)
		for _, w := range mine {
			sh := m.shadowOf(w.itemKey)
			sh.mu.Lock()
			sh.forget()
			sh.mu.Unlock()
		}
		return a
	}
	reasons := func(code func(i int, w *write) (string, string)) []reason {
		out := make([]reason, len(items))
		for i, w := range ws {
			out[i] = reason{Code: "None"}
			if c, msg := code(i, w); c != "" {
				out[i] = reason{Code: c, Message: msg}
			}
		}
		return out
	}

	// Another transaction holds one of the items: cancelled.
	m.mu.Lock()
	var clash []bool
	for _, w := range ws {
		clash = append(clash, w != nil && m.inflight[w.itemKey] > 0)
	}
	if slices.Contains(clash, true) {
		m.stats.conflicts++
		for i, w := range ws {
			if clash[i] {
				m.keyLocked(partKey{"", w.hash}).conflicts++
			}
		}
		m.mu.Unlock()
		return cancelled(reasons(func(i int, _ *write) (string, string) {
			if clash[i] {
				return "TransactionConflict", "Transaction is ongoing for the item"
			}
			return "", ""
		}))
	}
	held := map[string]bool{}
	for _, w := range mine {
		held[w.itemKey] = true
	}
	for k := range held {
		m.inflight[k]++
	}
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		for k := range held {
			if m.inflight[k]--; m.inflight[k] <= 0 {
				delete(m.inflight, k)
			}
		}
		m.mu.Unlock()
	}

	unlock := m.lockAll(mine)
	var charges []charge
	for _, w := range mine {
		if err := m.load(r.Context(), w.sh, w.key); err != nil {
			unlock()
			release()
			return unreachable(err)
		}
		if err := m.plan(w); err != nil {
			unlock()
			release()
			return m.refuse("TransactWriteItems", err)
		}
		charges = append(charges, w.charges...)
	}
	m.mu.Lock()
	refused := m.reserveLocked(m.clock.Now(), charges)
	m.mu.Unlock()
	if refused != nil {
		unlock()
		release()
		over := map[partKey]bool{}
		for _, pk := range refused {
			over[pk] = true
		}
		return cancelled(reasons(func(_ int, w *write) (string, string) {
			if w == nil {
				return "", ""
			}
			for _, c := range w.charges {
				if over[c.pk] {
					return "ThrottlingError", throttleMessage
				}
			}
			return "", ""
		}))
	}

	asked := askCapacity(f)
	fwd, _ := json.Marshal(f)
	a, err := m.forward(r, fwd)
	now := m.clock.Now()
	m.mu.Lock()
	switch {
	case err != nil || a.status >= 500:
		m.settleLocked(now, charges, none)
		for _, w := range mine {
			w.sh.forget()
		}
	case a.status == http.StatusOK:
		m.settleLocked(now, charges, all)
		if token != "" {
			m.tokens[token] = true
		}
	case a.errorType() == "TransactionCanceledException":
		m.settleLocked(now, charges, tableOnly)
	default:
		m.settleLocked(now, charges, none)
	}
	m.mu.Unlock()
	if err == nil {
		switch {
		case a.status == http.StatusOK:
			// Not compared with DynamoDB Local's ConsumedCapacity: for a
			// transaction of several items, DynamoDB Local 3.3.1 reports
			// what looks like one item's units, not their sum.
			for _, w := range mine {
				w.sh.known, w.sh.it = true, w.new
			}
		case a.errorType() == "TransactionCanceledException":
			var out struct{ CancellationReasons []reason }
			_ = json.Unmarshal(a.body, &out)
			for i, rs := range out.CancellationReasons {
				if i < len(ws) && ws[i] != nil && len(rs.Item) > 0 {
					if it, derr := decodeItem(rs.Item); derr == nil && it != nil {
						ws[i].sh.known, ws[i].sh.it = true, it
					}
				}
			}
		}
	}
	unlock()
	// The items stay in flight for as long as AWS would hold them.
	m.wait(r.Context(), m.hold)
	release()
	if err != nil {
		return unreachable(err)
	}
	asked.shape(a)
	return a
}

// batchWrite models BatchWriteItem: each request is throttled on its own
// and comes back in UnprocessedItems, as DynamoDB does; the whole call is
// refused with ProvisionedThroughputExceededException only when every
// request was. A request for an item a transaction holds makes the whole
// call fail with TransactionConflictException.
func (m *Model) batchWrite(r *http.Request, body []byte) *answer {
	f, err := requestFields(body)
	if err != nil {
		return m.forwardOrFail(r, body)
	}
	var reqs map[string][]map[string]json.RawMessage
	if err := json.Unmarshal(f["RequestItems"], &reqs); err != nil {
		return m.forwardOrFail(r, body)
	}
	raw, ok := reqs[m.schema.table]
	if !ok {
		return m.forwardOrFail(r, body)
	}
	ws := make([]*write, len(raw))
	for i, rq := range raw {
		var fields map[string]json.RawMessage
		op := "Put"
		if p, ok := rq["PutRequest"]; ok {
			err = json.Unmarshal(p, &fields)
		} else if d, ok := rq["DeleteRequest"]; ok {
			op = "Delete"
			err = json.Unmarshal(d, &fields)
		} else {
			err = errors.New("neither PutRequest nor DeleteRequest")
		}
		if err != nil {
			return m.refuse("BatchWriteItem", fmt.Errorf("%w: %v", ErrUnsupported, err))
		}
		if ws[i], err = m.parseWrite(op, fields, false); err != nil {
			return m.refuse("BatchWriteItem", err)
		}
	}
	m.mu.Lock()
	for _, w := range ws {
		if m.inflight[w.itemKey] > 0 {
			m.stats.conflicts++
			m.keyLocked(partKey{"", w.hash}).conflicts++
			m.mu.Unlock()
			return transactionConflict()
		}
	}
	m.mu.Unlock()
	unlock := m.lockAll(ws)
	defer unlock()
	for _, w := range ws {
		if err := m.load(r.Context(), w.sh, w.key); err != nil {
			return unreachable(err)
		}
		if err := m.plan(w); err != nil {
			return m.refuse("BatchWriteItem", err)
		}
	}
	var accepted []*write
	var kept, unprocessed []map[string]json.RawMessage
	var firstRefused partKey
	m.mu.Lock()
	now := m.clock.Now()
	for i, w := range ws {
		if refused := m.reserveLocked(now, w.charges); refused != nil {
			if len(unprocessed) == 0 {
				firstRefused = refused[0]
			}
			unprocessed = append(unprocessed, raw[i])
			continue
		}
		accepted = append(accepted, w)
		kept = append(kept, raw[i])
	}
	m.mu.Unlock()
	if len(kept) == 0 {
		delete(reqs, m.schema.table)
	} else {
		reqs[m.schema.table] = kept
	}
	if len(reqs) == 0 {
		return m.throttled(firstRefused, true)
	}
	var charges []charge
	for _, w := range accepted {
		charges = append(charges, w.charges...)
	}
	f["RequestItems"], _ = json.Marshal(reqs)
	asked := askCapacity(f)
	fwd, _ := json.Marshal(f)
	a, err := m.forward(r, fwd)
	now = m.clock.Now()
	m.mu.Lock()
	if err != nil || a.status != http.StatusOK {
		m.settleLocked(now, charges, none)
	} else {
		m.settleLocked(now, charges, all)
	}
	m.mu.Unlock()
	if err != nil {
		for _, w := range ws {
			w.sh.forget()
		}
		return unreachable(err)
	}
	if a.status != http.StatusOK {
		return a
	}
	for _, w := range accepted {
		w.sh.known, w.sh.it = true, w.new
	}
	m.checkCapacity("BatchWriteItem", a, charges)
	if len(unprocessed) > 0 {
		var out map[string]json.RawMessage
		if json.Unmarshal(a.body, &out) == nil {
			var un map[string][]json.RawMessage
			_ = json.Unmarshal(out["UnprocessedItems"], &un)
			if un == nil {
				un = map[string][]json.RawMessage{}
			}
			for _, u := range unprocessed {
				b, _ := json.Marshal(u)
				un[m.schema.table] = append(un[m.schema.table], b)
			}
			out["UnprocessedItems"], _ = json.Marshal(un)
			a.body, _ = json.Marshal(out)
		}
	}
	asked.shape(a)
	return a
}
