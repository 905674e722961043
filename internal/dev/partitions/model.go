package partitions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// What one partition of DynamoDB gives a partition key value, and the rate
// the limits are stated for (DESIGN.md, guarantee 18).
const (
	PartitionWriteUnits    = 1000
	PartitionReadUnits     = 3000
	FullScaleJobsPerSecond = 10000
)

// Limits are the units a partition key value of the table or of an index
// accepts per second; 0 is no limit.
type Limits struct {
	WriteUnitsPerSecond float64
	ReadUnitsPerSecond  float64
}

// Scaled returns a partition's limits scaled by k: a run at k x 10,000
// jobs per second gives each key k x 1,000 write and k x 3,000 read units
// per second, so a key that is hot at full scale is hot in the run.
func Scaled(k float64) Limits {
	return Limits{WriteUnitsPerSecond: PartitionWriteUnits * k, ReadUnitsPerSecond: PartitionReadUnits * k}
}

// Clock tells the time of the buckets and windows (jobs.Clock and
// jobstest.Clock fit).
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// DefaultTransactionHold is the extra time a transaction's items stay in
// flight after DynamoDB Local answered it. In AWS a TransactWriteItems
// takes about 10-30 ms (two phases over the items' partitions) and a
// single write a few ms; DynamoDB Local answers a transaction in 1-3 ms.
// Holding the items 10 ms longer (and answering then, as AWS would) gives
// concurrent transactions on one item the window they have in AWS.
const DefaultTransactionHold = 10 * time.Millisecond

// Config configures a Model.
type Config struct {
	// Target is DynamoDB Local's endpoint (http://host:port).
	Target string
	// Table is the modelled table's definition, its key and its global
	// secondary indexes (dynamostore.CreateTableInput(name)): the model
	// follows the schema it is given. Requests on other tables are
	// forwarded unmodelled.
	Table *dynamodb.CreateTableInput
	// Limits per partition key value (see Scaled); changeable with
	// SetLimits.
	Limits Limits
	// Scale is k, the run's rate over FullScaleJobsPerSecond, for the
	// report (see Report); SetScale changes it.
	Scale float64
	// Classify names the class of a key for the report ("job item",
	// "batch item", "owner index partition"...); index is "" for the
	// table. Nil: the table or the index's name.
	Classify func(index, key string) string
	// TransactionHold: see DefaultTransactionHold (0: the default,
	// negative: none).
	TransactionHold time.Duration
	// Clock times the buckets and the windows (the wall clock if nil).
	Clock Clock
}

// Model is an HTTP proxy in front of DynamoDB Local that behaves as
// DynamoDB's partitions do (see the package documentation).
type Model struct {
	schema *schema
	target *url.URL
	client *http.Client
	clock  Clock
	hold   time.Duration
	// wait holds a transaction's items (tests replace it).
	wait     func(ctx context.Context, d time.Duration)
	classify func(index, key string) string
	ln       net.Listener
	srv      *http.Server

	mu       sync.Mutex
	limits   Limits
	scale    float64
	epoch    time.Time
	keys     map[partKey]*keyState
	items    map[string]*shadow
	inflight map[string]int // item key -> transactions holding it
	// fresh: the table was created through the model (see load).
	fresh bool
	// tokens are the ClientRequestTokens of transactions that landed.
	tokens map[string]bool
	stats  stats
}

// partKey is a partition key value of the table (index "") or of an index.
type partKey struct{ index, key string }

type keyState struct {
	class     string
	wb, rb    bucket
	w, r      meter
	conflicts int
}

// shadow is what the model knows of an item: all of it, or that it does
// not exist (it nil), once known. mu serialises the model's writes of the
// item: its old value is read, the write forwarded and the new value
// recorded as one step.
type shadow struct {
	mu    sync.Mutex
	known bool
	it    item
	// doubt: a write of the item failed or timed out, so it may have
	// landed: load reads the item even on a fresh table.
	doubt bool
}

// forget marks what the shadow knows as doubtful (a write whose outcome
// is unknown): the next load reads the item.
func (sh *shadow) forget() { sh.known, sh.doubt = false, true }

type stats struct {
	requests, forwarded, throttled, conflicts, shadowReads int
	capacityChecks                                         int
	unmodelled                                             map[string]int
	errors                                                 []string
	errorCount                                             int
	mismatches                                             []string
	mismatchCount                                          int
	first, last                                            time.Time
}

// Start starts a Model on a free 127.0.0.1 port.
func Start(cfg Config) (*Model, error) {
	s, err := schemaOf(cfg.Table)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.Target)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("partitions: Config.Target %q is not http://host:port", cfg.Target)
	}
	m := &Model{
		schema: s, target: u, clock: cfg.Clock, hold: cfg.TransactionHold, classify: cfg.Classify,
		limits: cfg.Limits, scale: cfg.Scale,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}},
		keys:   map[partKey]*keyState{}, items: map[string]*shadow{}, inflight: map[string]int{}, tokens: map[string]bool{},
	}
	if m.clock == nil {
		m.clock = wallClock{}
	}
	if m.hold == 0 {
		m.hold = DefaultTransactionHold
	}
	m.wait = func(ctx context.Context, d time.Duration) {
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	m.epoch = m.clock.Now()
	m.stats.unmodelled = map[string]int{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m.ln = ln
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// URL returns the model's endpoint, for the SDK's BaseEndpoint or the
// local stack's Config.DynamoDBEndpoint.
func (m *Model) URL() string { return "http://" + m.ln.Addr().String() }

// Close stops the model.
func (m *Model) Close() {
	_ = m.srv.Close()
	m.client.CloseIdleConnections()
}

// SetLimits changes the limits of every key (buckets keep their content,
// up to the new limit).
func (m *Model) SetLimits(l Limits) {
	m.mu.Lock()
	m.limits = l
	m.mu.Unlock()
}

// SetScale changes k (see Config.Scale).
func (m *Model) SetScale(k float64) {
	m.mu.Lock()
	m.scale = k
	m.mu.Unlock()
}

// Reset forgets what was recorded (units, refusals, errors) and refills
// every bucket; what the model knows of the items stays.
func (m *Model) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys = map[partKey]*keyState{}
	m.stats = stats{unmodelled: map[string]int{}}
	m.epoch = m.clock.Now()
}

// errorf records an error of the model for the report.
func (m *Model) errorf(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.errorCount++
	if len(m.stats.errors) < 50 {
		m.stats.errors = append(m.stats.errors, fmt.Sprintf(format, args...))
	}
}

func (m *Model) mismatchf(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stats.mismatchCount++
	if len(m.stats.mismatches) < 50 {
		m.stats.mismatches = append(m.stats.mismatches, fmt.Sprintf(format, args...))
	}
}

// keyLocked returns a key's state; m.mu is held.
func (m *Model) keyLocked(k partKey) *keyState {
	ks, ok := m.keys[k]
	if !ok {
		ks = &keyState{class: m.classOf(k)}
		m.keys[k] = ks
	}
	return ks
}

func (m *Model) classOf(k partKey) string {
	if m.classify != nil {
		if c := m.classify(k.index, k.key); c != "" {
			return c
		}
	}
	if k.index == "" {
		return "table " + m.schema.table
	}
	return "index " + k.index
}

func (m *Model) shadowOf(itemKey string) *shadow {
	m.mu.Lock()
	defer m.mu.Unlock()
	sh, ok := m.items[itemKey]
	if !ok {
		sh = &shadow{}
		m.items[itemKey] = sh
	}
	return sh
}

func (m *Model) sec(now time.Time) int64 { return int64(now.Sub(m.epoch) / m.window()) }

// window is one second of the service on the model's clock: 1/k seconds at
// scale k < 1, since a run at k x 10,000 jobs per second does in 1/k
// seconds what the service does in one at full scale. A partition's budget
// holds per window (the bucket's capacity), and the report's peaks are per
// window: units per second at full scale.
func (m *Model) window() time.Duration {
	if m.scale > 0 && m.scale < 1 {
		return time.Duration(float64(time.Second) / m.scale)
	}
	return time.Second
}

// capacity is a bucket's capacity for a budget of rate units per second of
// the model's clock: one window of it.
func (m *Model) capacity(rate float64) float64 { return rate * m.window().Seconds() }

// ServeHTTP models the request, then forwards it or answers as DynamoDB
// would without forwarding it.
func (m *Model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	op, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	m.mu.Lock()
	m.stats.requests++
	now := m.clock.Now()
	if m.stats.first.IsZero() {
		m.stats.first = now
	}
	m.stats.last = now
	m.mu.Unlock()
	var a *answer
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		a = m.single(r, op, body)
	case "TransactWriteItems":
		a = m.transact(r, body)
	case "BatchWriteItem":
		a = m.batchWrite(r, body)
	case "GetItem":
		a = m.getItem(r, body)
	case "BatchGetItem":
		a = m.batchGet(r, body)
	case "Query":
		a = m.query(r, body)
	case "Scan", "TransactGetItems", "ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction":
		// Data operations the model does not charge; the report lists them.
		m.mu.Lock()
		m.stats.unmodelled[op]++
		m.mu.Unlock()
		a = m.forwardOrFail(r, body)
	case "CreateTable":
		a = m.forwardOrFail(r, body)
		if f, err := requestFields(body); err == nil && a.status == http.StatusOK && str(f["TableName"]) == m.schema.table {
			m.mu.Lock()
			m.fresh = true
			m.mu.Unlock()
		}
	case "DeleteTable":
		a = m.forwardOrFail(r, body)
		if f, err := requestFields(body); err == nil && a.status == http.StatusOK && str(f["TableName"]) == m.schema.table {
			m.mu.Lock()
			m.fresh, m.items = false, map[string]*shadow{}
			m.mu.Unlock()
		}
	default:
		a = m.forwardOrFail(r, body)
	}
	a.write(w)
}

// answer is an HTTP answer, DynamoDB Local's or the model's.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a *answer) write(w http.ResponseWriter) {
	for k, vs := range a.header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Connection", "Transfer-Encoding", "X-Amz-Crc32":
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// errorType is the error's shape name, from an answer's body.
func (a *answer) errorType() string {
	if a.status < 400 {
		return ""
	}
	var e struct {
		Type string `json:"__type"`
	}
	_ = json.Unmarshal(a.body, &e)
	return e.Type[strings.LastIndexByte(e.Type, '#')+1:]
}

// forward sends body to DynamoDB Local with the request's headers.
func (m *Model) forward(r *http.Request, body []byte) (*answer, error) {
	u := *m.target
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Accept-Encoding", "Connection", "Expect":
			continue
		}
		req.Header[k] = vs
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.stats.forwarded++
	m.mu.Unlock()
	return &answer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func (m *Model) forwardOrFail(r *http.Request, body []byte) *answer {
	a, err := m.forward(r, body)
	if err != nil {
		return unreachable(err)
	}
	return a
}

// own makes a request of the model's own to DynamoDB Local (to learn an
// item it has not seen), charged to nobody.
func (m *Model) own(ctx context.Context, op string, in any) (*answer, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.target.String()+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	// DynamoDB Local wants a signed-looking request; it checks no signature.
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=partitions/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	a := &answer{status: resp.StatusCode, header: resp.Header, body: b}
	if a.status != http.StatusOK {
		return nil, fmt.Errorf("partitions: %s of the model's own answered %d %s", op, a.status, b)
	}
	return a, nil
}

// load makes sure sh knows its item, reading it (strongly consistent,
// uncharged) if needed; sh.mu is held.
func (m *Model) load(ctx context.Context, sh *shadow, key item) error {
	if sh.known {
		return nil
	}
	m.mu.Lock()
	fresh := m.fresh
	m.mu.Unlock()
	if fresh && !sh.doubt {
		// The table was created through the model: every write went
		// through it, and an item it never saw does not exist (unless a
		// write of it failed without saying whether it landed).
		sh.known, sh.it = true, nil
		return nil
	}
	a, err := m.own(ctx, "GetItem", map[string]any{"TableName": m.schema.table, "Key": key, "ConsistentRead": true})
	if err != nil {
		return err
	}
	var out struct{ Item json.RawMessage }
	if err := json.Unmarshal(a.body, &out); err != nil {
		return err
	}
	it, err := decodeItem(out.Item)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.stats.shadowReads++
	m.mu.Unlock()
	sh.known, sh.it = true, it
	return nil
}

// learn records an item a read returned whole, if the model has never
// seen it (a write under way, or done since the read, knows better).
func (m *Model) learn(it item) {
	if it == nil {
		return
	}
	k, _, err := m.schema.itemKey(it)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, seen := m.items[k]; !seen {
		m.items[k] = &shadow{known: true, it: it}
	}
}

// requestFields decodes a request body as its top-level fields.
func requestFields(body []byte) (map[string]json.RawMessage, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	return req, nil
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func boolean(raw json.RawMessage) bool {
	var b bool
	_ = json.Unmarshal(raw, &b)
	return b
}

// expressionMaps decodes ExpressionAttributeNames and Values.
func expressionMaps(f map[string]json.RawMessage) (map[string]string, map[string]*value, error) {
	var names map[string]string
	var values map[string]*value
	if raw, ok := f["ExpressionAttributeNames"]; ok {
		if err := json.Unmarshal(raw, &names); err != nil {
			return nil, nil, err
		}
	}
	if raw, ok := f["ExpressionAttributeValues"]; ok {
		if err := json.Unmarshal(raw, &values); err != nil {
			return nil, nil, err
		}
	}
	return names, values, nil
}

// capacityMode handles ReturnConsumedCapacity: the model asks DynamoDB
// Local for INDEXES and gives the caller what it asked for.
type capacityMode string

func askCapacity(f map[string]json.RawMessage) capacityMode {
	asked := capacityMode(str(f["ReturnConsumedCapacity"]))
	f["ReturnConsumedCapacity"] = json.RawMessage(`"INDEXES"`)
	return asked
}

// shape returns an answer's body with the consumed capacity cut to what
// the caller asked for and the named fields removed.
func (c capacityMode) shape(a *answer, drop ...string) {
	if a.status != http.StatusOK {
		return
	}
	if c == "INDEXES" && len(drop) == 0 {
		return
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(a.body, &out) != nil {
		return
	}
	for _, d := range drop {
		delete(out, d)
	}
	switch c {
	case "INDEXES":
	case "TOTAL":
		if raw, ok := out["ConsumedCapacity"]; ok {
			out["ConsumedCapacity"] = totalOnly(raw)
		}
	default:
		delete(out, "ConsumedCapacity")
	}
	if b, err := json.Marshal(out); err == nil {
		a.body = b
	}
}

func totalOnly(raw json.RawMessage) json.RawMessage {
	cut := func(c map[string]json.RawMessage) {
		delete(c, "Table")
		delete(c, "GlobalSecondaryIndexes")
		delete(c, "LocalSecondaryIndexes")
	}
	var one map[string]json.RawMessage
	if json.Unmarshal(raw, &one) == nil {
		cut(one)
		b, _ := json.Marshal(one)
		return b
	}
	var many []map[string]json.RawMessage
	if json.Unmarshal(raw, &many) == nil {
		for _, c := range many {
			cut(c)
		}
		b, _ := json.Marshal(many)
		return b
	}
	return raw
}

// consumed is DynamoDB Local's ConsumedCapacity of the model's table:
// the table's units and each index's.
type consumed struct {
	table   float64
	indexes map[string]float64
	found   bool
}

func (m *Model) consumedOf(body []byte) consumed {
	type units struct{ CapacityUnits float64 }
	type cc struct {
		TableName              string
		CapacityUnits          float64
		Table                  *units
		GlobalSecondaryIndexes map[string]units
	}
	var out struct{ ConsumedCapacity json.RawMessage }
	c := consumed{indexes: map[string]float64{}}
	if json.Unmarshal(body, &out) != nil || len(out.ConsumedCapacity) == 0 {
		return c
	}
	var list []cc
	var one cc
	if json.Unmarshal(out.ConsumedCapacity, &one) == nil && one.TableName != "" {
		list = []cc{one}
	} else {
		_ = json.Unmarshal(out.ConsumedCapacity, &list)
	}
	for _, x := range list {
		if x.TableName != m.schema.table {
			continue
		}
		c.found = true
		if x.Table != nil {
			c.table += x.Table.CapacityUnits
		} else {
			c.table += x.CapacityUnits
		}
		for name, u := range x.GlobalSecondaryIndexes {
			c.indexes[name] += u.CapacityUnits
		}
	}
	return c
}

// Errors the model answers with, as DynamoDB's JSON protocol carries them.
const (
	typePrefix = "com.amazonaws.dynamodb.v20120810#"
	// The message AWS gives for a throttled on-demand table or index.
	throttleMessage = "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically scaling your table or index so please try again shortly. If exceptions persist, check if you have a hot key: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html"
)

func errorAnswer(status int, typ string, fields map[string]any) *answer {
	out := map[string]any{"__type": typePrefix + typ}
	for k, v := range fields {
		out[k] = v
	}
	b, _ := json.Marshal(out)
	return &answer{status: status, header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}}, body: b}
}

// throttled is DynamoDB's answer to a request over a key's budget.
func (m *Model) throttled(k partKey, write bool) *answer {
	kind, what := "Read", "read"
	if write {
		kind, what = "Write", "write"
	}
	res, rtype := "arn:aws:dynamodb:us-east-1:000000000000:table/"+m.schema.table, "Table"
	if k.index != "" {
		res, rtype = res+"/index/"+k.index, "Index"
	}
	return errorAnswer(http.StatusBadRequest, "ProvisionedThroughputExceededException", map[string]any{
		"message":           throttleMessage + " (partition model: a " + m.classOf(k) + " is over its " + what + " units per second)",
		"ThrottlingReasons": []map[string]string{{"reason": rtype + kind + "KeyRangeThroughputExceeded", "resource": res}},
	})
}

func transactionConflict() *answer {
	return errorAnswer(http.StatusBadRequest, "TransactionConflictException", map[string]any{
		"message": "Transaction is ongoing for the item",
	})
}

// reason is one item's CancellationReason.
type reason struct {
	Code    string
	Message string          `json:",omitempty"`
	Item    json.RawMessage `json:",omitempty"`
}

func cancelled(reasons []reason) *answer {
	codes := make([]string, len(reasons))
	for i, r := range reasons {
		codes[i] = r.Code
	}
	return errorAnswer(http.StatusBadRequest, "TransactionCanceledException", map[string]any{
		"Message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	})
}

// refuse answers a request the model cannot charge exactly, and records it.
func (m *Model) refuse(op string, err error) *answer {
	m.errorf("%s refused: %v", op, err)
	msg := err.Error()
	if !errors.Is(err, ErrUnsupported) {
		msg = "partition model: " + msg
	}
	return errorAnswer(http.StatusBadRequest, "ValidationException", map[string]any{"message": msg})
}

func unreachable(err error) *answer {
	return errorAnswer(http.StatusInternalServerError, "InternalServerError", map[string]any{
		"message": "partition model: DynamoDB Local did not answer: " + err.Error(),
	})
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
