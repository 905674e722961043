package dynamostore

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// A payload too large for its job's item at one write unit has an item of
// its own (driver.PartPayload): written once, before the job, and never
// again but by KeepPart (a job that outlived its horizon). Every later
// write of the job (its claim, partial results, heartbeats, its final
// write, and on AWS each failed condition) then rewrites a small item.
//
// The payload item's key is storekey.PayloadPrefix, the job's id, '#' and
// the payload's hash (the job's attrPayloadRef): two requests that race
// for one idempotency key with different payloads write two items, so the
// loser's never takes the winner's place (it expires by its TTL).

// writeUnit is the size DynamoDB bills one write unit for.
const writeUnit = 1024

// attrPayloadRef is the hash naming a job's payload item (Record.PayloadRef).
const attrPayloadRef = "pr"

// attrPayloadZ holds a payload item's payload compressed (raw DEFLATE, a
// binary attribute) when that is smaller, as JSON mostly is: an S3 event
// record's 1.2 KB take one write unit instead of two. attrPayload holds
// it as it is otherwise (sealed fields, already dense, do not shrink).
const attrPayloadZ = "pz"

// deflate compresses p, or returns nil when that does not make it smaller.
func deflate(p []byte) []byte {
	var b bytes.Buffer
	w, err := flate.NewWriter(&b, flate.DefaultCompression)
	if err != nil {
		return nil
	}
	if _, err := w.Write(p); err != nil || w.Close() != nil || b.Len() >= len(p) {
		return nil
	}
	return b.Bytes()
}

// maxInflated bounds what inflate reads: more than any part this store
// writes (a payload sealed, past MaxPayloadBytes by its seals' overhead,
// is under DynamoDB's 400 KB item), so only a corrupt item reaches it.
const maxInflated = 1 << 20

// inflate reverses deflate. An item that does not inflate, or inflates
// past maxInflated, cannot be read: driver.ErrPartMissing.
func inflate(z []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(z))
	defer r.Close()
	p, err := io.ReadAll(io.LimitReader(r, maxInflated+1))
	if err != nil || len(p) > maxInflated {
		return nil, fmt.Errorf("%w: it does not inflate (%d bytes read)", driver.ErrPartMissing, len(p))
	}
	return p, nil
}

// payloadKey is the key of job id's payload item named ref.
func payloadKey(id, ref string) map[string]types.AttributeValue {
	return key(storekey.PayloadPrefix + id + "#" + ref)
}

// payloadRef is the name of payload's item: 16 characters of its SHA-256.
func payloadRef(payload []byte) string {
	sum := sha256.Sum256(payload)
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// apart reports whether rec's payload goes in an item of its own: when,
// in the job's item as its claim writes it (claimedSize), it adds a write
// unit to every write of the job. A payload that adds none (the rest of
// the item is already past a unit and the payload fits in what is left
// of it) stays.
func apart(rec *driver.Record) (bool, error) {
	switch {
	case len(rec.Payload) == 0:
		return false, nil
	case len(rec.Payload) > writeUnit*400: // past any item: no need to size one
		return true, nil
	}
	with, err := claimedSize(rec)
	if err != nil || with <= writeUnit {
		return false, err
	}
	c := *rec
	c.Payload, c.PayloadRef = nil, payloadRef(rec.Payload)
	without, err := claimedSize(&c)
	return units(with) > units(without), err
}

func units(size int) int { return (size + writeUnit - 1) / writeUnit }

// claimedSize is the size of rec's item as its claim writes it, by
// DynamoDB's rules (itemSize), with what a run and a retry add: running, a
// claim token, a lease, a start, a sweep entry, a dispatch count and a
// previous attempt's failure code (of up to 24 characters, which covers
// every reserved one).
func claimedSize(rec *driver.Record) (int, error) {
	c := *rec
	c.Status = jobs.StatusRunning
	c.ClaimToken = "00000000-0000-0000-0000-000000000000" // a claim token's length
	at := c.CreatedAt
	if at.IsZero() {
		at = time.UnixMilli(1e12)
	}
	c.LeaseUntil, c.StartedAt, c.FirstStartedAt, c.UpdatedAt = at, at, at, at
	if c.SweepAt.IsZero() {
		c.SweepAt = at // a run's first heartbeat puts it in the sweep index
	}
	if c.LastError == "" {
		c.LastError = "xxxxxxxxxxxxxxxxxxxxxxxx"
	}
	c.Attempt++
	c.Dispatches++
	c.WaitingOn = ""
	av, err := marshalItem(&c)
	if err != nil {
		return 0, err
	}
	return itemSize(av), nil
}

// itemSize is the size DynamoDB bills an item at: each attribute's name
// and value, where a string or binary counts its bytes, a number about one
// byte per two significant digits plus one, a boolean or null one, a list
// or map 3 bytes plus one per element and its elements, a set its
// elements.
// https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html
func itemSize(av map[string]types.AttributeValue) int {
	n := 0
	for name, v := range av {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

// numberSize is a number's size: one byte per two significant digits,
// plus one.
func numberSize(s string) int {
	digits := 0
	for _, r := range s {
		if r >= '0' && r <= '9' {
			digits++
		}
	}
	return (digits+1)/2 + 1
}

// payloadPut is the put of rec's payload item under ref, living until
// rec.PayloadUntil (or the job's retention after now when the caller set
// none). An item under the same key holds the same payload (a retried
// request, a duplicate): Create conditions its put on that item's TTL
// being sooner (putPayload), so a duplicate never shortens a live job's;
// in a transaction it is unconditional (a failed condition would cancel
// the caller's transaction; its job's put fails first on a duplicate).
func (s *Store) payloadPut(rec *driver.Record, ref string) *dynamodb.PutItemInput {
	until := rec.PayloadUntil
	if until.IsZero() {
		until = s.clock.Now().Add(jobs.DefaultRetention)
	}
	av := payloadKey(rec.ID, ref)
	if z := deflate(rec.Payload); z != nil {
		av[attrPayloadZ] = &types.AttributeValueMemberB{Value: z}
	} else {
		av[attrPayload] = &types.AttributeValueMemberS{Value: string(rec.Payload)}
	}
	av[AttrExpires] = num(until.Unix())
	return &dynamodb.PutItemInput{TableName: s.table, Item: av, ReturnConsumedCapacity: s.capacity()}
}

// putPayload writes rec's payload item under ref.
func (s *Store) putPayload(ctx context.Context, rec *driver.Record, ref string) error {
	if !utf8.Valid(rec.Payload) {
		return fmt.Errorf("dynamostore: payload of %s is not UTF-8", rec.ID)
	}
	in := s.payloadPut(rec, ref)
	e := newExpr()
	e.when(e.notExists(AttrID) + " OR " + e.n(AttrExpires) + " < " + e.v(in.Item[AttrExpires]))
	in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.condition(), e.names, e.values
	out, err := s.putItem(ctx, in)
	if _, failed := conditionFailed(err); failed {
		return nil // the same payload is there, and lasts longer
	}
	if err != nil {
		return fmt.Errorf("dynamostore: payload of %s: %w", rec.ID, err)
	}
	s.report("payload", out.ConsumedCapacity)
	return nil
}

// ReadPart reads part p of rec from its own item (a strongly consistent
// read), or returns it from rec when it is in the job's item.
func (s *Store) ReadPart(ctx context.Context, rec *driver.Record, p driver.Part) ([]byte, time.Time, error) {
	ref, inline, k, attr, err := partOf(rec, p)
	if err != nil || ref == "" {
		return inline, time.Time{}, err
	}
	if _, size := objectOf(rec, p); size > 0 {
		return s.readObject(ctx, rec, p, ref, size)
	}
	av, until, err := s.readSide(ctx, "get_"+partOp(p), k)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("dynamostore: %s of %s: %w", p, rec.ID, err)
	}
	var data []byte
	switch v := av[attr].(type) {
	case *types.AttributeValueMemberS:
		data = []byte(v.Value)
	case *types.AttributeValueMemberB:
		data = v.Value
	default:
		z, ok := av[attrPayloadZ].(*types.AttributeValueMemberB)
		if !ok {
			return nil, time.Time{}, driver.ErrPartMissing
		}
		if data, err = inflate(z.Value); err != nil {
			return nil, time.Time{}, fmt.Errorf("dynamostore: %s of %s: %w", p, rec.ID, err)
		}
	}
	return data, until, nil
}

// KeepPart moves the TTL of rec's item of part p to until, if it was
// sooner. A missing item stays missing (the next ReadPart says so).
func (s *Store) KeepPart(ctx context.Context, rec *driver.Record, p driver.Part, until time.Time) error {
	ref, _, k, _, err := partOf(rec, p)
	if err != nil || ref == "" {
		return err
	}
	if _, size := objectOf(rec, p); size > 0 {
		if s.opts.Objects == nil {
			return fmt.Errorf("dynamostore: %s of %s is an object, and the store has no object tier (Config.Objects)", p, rec.ID)
		}
		err := s.opts.Objects.Keep(ctx, objectKey(rec.ID, p, ref), until)
		if errors.Is(err, ErrObjectMissing) {
			return nil // the next ReadPart says so
		}
		return err
	}
	return s.keepSide(ctx, "keep_"+partOp(p), k, until)
}

// partOf is part p of rec: the name of its item ("" when it is in the
// job's item), the part as rec holds it, its item's key, and the attribute
// holding it there uncompressed.
func partOf(rec *driver.Record, p driver.Part) (string, []byte, map[string]types.AttributeValue, string, error) {
	switch p {
	case driver.PartPayload:
		return rec.PayloadRef, rec.Payload, payloadKey(rec.ID, rec.PayloadRef), attrPayload, nil
	case driver.PartCheckpoint:
		return rec.CheckpointRef, rec.Checkpoint, checkpointKey(rec.ID, rec.CheckpointRef), attrCheckpoint, nil
	case driver.PartResult:
		return rec.ResultRef, rec.Result, resultKey(rec.ID, rec.ResultRef), attrResult, nil
	}
	if name, ok := p.Signal(); ok {
		ref := rec.SignalRefs[name]
		return ref, rec.Signals[name], signalKey(rec.ID, ref), attrSignalData, nil
	}
	return "", nil, nil, "", fmt.Errorf("dynamostore: no part %q", p)
}

// partOp names reads and writes of part p's items in capacity reports.
func partOp(p driver.Part) string {
	if _, ok := p.Signal(); ok {
		return "signal"
	}
	return string(p)
}

// A signal over signalInline bytes (sealed: it does not compress) goes
// into an item of its own, keyed by storekey.SignalPrefix, the job's id,
// '#' and the sealed signal's hash, before the write that delivers it
// names it (the job's attribute of the signal, then a string): every
// later write of the job would otherwise pay for its bytes, up to 8 of
// them; a signal kept apart costs its item's write once and a strongly
// consistent read at each claim (docs/evidence/CAPACITY.md). The bound is lower
// than a checkpoint's because a job holds up to 8 signals and one
// checkpoint.
const signalInline = 256

// attrSignalData holds the sealed signal in its item.
const attrSignalData = "g"

func signalKey(id, ref string) map[string]types.AttributeValue {
	return key(storekey.SignalPrefix + id + "#" + ref)
}

// putSignal puts sg in an item of its own (until sg.Until) when over
// signalInline, and returns the item's name ("" for a signal that goes in
// the job's item).
func (s *Store) putSignal(ctx context.Context, id string, sg driver.Signal) (string, error) {
	if len(sg.Data) <= signalInline || s.inline {
		return "", nil
	}
	ref := payloadRef(sg.Data)
	return ref, s.putPart(ctx, driver.SignalPart(sg.Name), signalKey(id, ref), map[string]types.AttributeValue{attrSignalData: &types.AttributeValueMemberB{Value: sg.Data}}, sg.Until)
}

// readSide reads the side item (a payload's, a checkpoint's) at k,
// strongly consistent, and its TTL: an item past it is none (DynamoDB
// deletes expired items within days, not at once).
func (s *Store) readSide(ctx context.Context, op string, k map[string]types.AttributeValue) (map[string]types.AttributeValue, time.Time, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              s.table,
		Key:                    k,
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: s.capacity(),
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	s.report(op, out.ConsumedCapacity)
	var until time.Time
	if n, ok := out.Item[AttrExpires].(*types.AttributeValueMemberN); ok {
		if sec, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			until = time.Unix(sec, 0).UTC()
		}
	}
	if !until.IsZero() && !s.clock.Now().Before(until) {
		return nil, time.Time{}, nil
	}
	return out.Item, until, nil
}

// keepSide moves the TTL of the side item at k to until, if it was sooner
// and the item is there and has not expired.
func (s *Store) keepSide(ctx context.Context, op string, k map[string]types.AttributeValue, until time.Time) error {
	e := newExpr()
	at := e.vn(until.Unix())
	e.setTo(AttrExpires, at)
	e.when("attribute_exists(" + e.n(AttrID) + ")")
	e.when(e.notExists(AttrExpires) + " OR " + e.n(AttrExpires) + " < " + at)
	// Expired but not deleted yet (TTL deletes within days) is gone.
	e.when(e.notExists(AttrExpires) + " OR " + e.n(AttrExpires) + " > " + e.vn(s.clock.Now().Unix()))
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: k,
		UpdateExpression: e.update(), ConditionExpression: e.condition(),
		ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
		ReturnConsumedCapacity: s.capacity(),
	})
	if _, failed := conditionFailed(err); failed {
		return nil // it lasts as long already, or is gone
	}
	if err != nil {
		return fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	s.report(op, out.ConsumedCapacity)
	return nil
}

// A checkpoint over checkpointInline bytes (sealed: it does not compress)
// goes into an item of its own too, keyed by storekey.CheckpointPrefix, the
// job's id, '#' and the checkpoint's hash, before the job's write that
// names it (attrCheckpointRef): a long run's heartbeats and its final
// write then rewrite a small item. The store cannot see the rest of the
// item in a checkpoint's write, so the bound is fixed: with the rest of a
// typical job's item (about 450 bytes; 600 with the longest owner) a
// checkpoint up to it stays within one write unit, where an item of its
// own would cost one more.
const checkpointInline = 400

// attrCheckpointRef is the hash naming a job's checkpoint item
// (Record.CheckpointRef).
const attrCheckpointRef = "cr"

func checkpointKey(id, ref string) map[string]types.AttributeValue {
	return key(storekey.CheckpointPrefix + id + "#" + ref)
}

// putCheckpoint puts checkpoint data of job id in its own item (until its
// TTL) when over checkpointInline, and returns the item's name ("" for a
// checkpoint that stays in the job's item).
func (s *Store) putCheckpoint(ctx context.Context, id string, data []byte, until time.Time) (string, error) {
	if len(data) <= checkpointInline || s.inline {
		return "", nil
	}
	ref := payloadRef(data)
	return ref, s.putPart(ctx, driver.PartCheckpoint, checkpointKey(id, ref), map[string]types.AttributeValue{attrCheckpoint: &types.AttributeValueMemberB{Value: data}}, until)
}

// putPart puts the item k of a job's part p, holding attrs, until its TTL
// (the retention after now when until is zero).
func (s *Store) putPart(ctx context.Context, p driver.Part, k, attrs map[string]types.AttributeValue, until time.Time) error {
	if until.IsZero() {
		until = s.clock.Now().Add(jobs.DefaultRetention)
	}
	for name, v := range attrs {
		k[name] = v
	}
	k[AttrExpires] = num(until.Unix())
	// An item of that name holds the same bytes (its name is their hash):
	// a put never shortens its TTL (a stale run's final write, computed
	// earlier, puts the same result before its condition fails).
	e := newExpr()
	e.when(e.notExists(AttrID) + " OR " + e.n(AttrExpires) + " < " + e.v(k[AttrExpires]))
	out, err := s.putItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: k, ReturnConsumedCapacity: s.capacity(),
		ConditionExpression: e.condition(), ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values})
	if _, failed := conditionFailed(err); failed {
		return nil // there, and lasting longer
	}
	if err != nil {
		return fmt.Errorf("dynamostore: put a %s item: %w", p, err)
	}
	s.report(partOp(p)+"_item", out.ConsumedCapacity)
	return nil
}

// checkpoint sets the job's checkpoint to data, or, with ref (from
// putCheckpoint), to the item ref names.
func (e *expr) checkpoint(data []byte, ref string) {
	if ref != "" {
		e.setTo(attrCheckpointRef, e.vs(ref))
		e.del(attrCheckpoint)
		return
	}
	e.setTo(attrCheckpoint, e.v(&types.AttributeValueMemberB{Value: data}))
	e.del(attrCheckpointRef)
}

// A final result over resultInline bytes goes into an item of its own,
// compressed when smaller (results are JSON), keyed by
// storekey.ResultPrefix, the job's id, '#' and the result's hash, just
// before the final write that names it (attrResultRef), with the job's
// TTL: the writes after it (post-outcome steps, a retry from the API)
// rewrite a small item. The bound is fixed, as a checkpoint's.
const resultInline = 400

// attrResultRef is the hash naming a job's result item (Record.ResultRef).
const attrResultRef = "rr"

func resultKey(id, ref string) map[string]types.AttributeValue {
	return key(storekey.ResultPrefix + id + "#" + ref)
}

// StageResult writes the object of a final result of job id that will be
// one (driver.ResultStager), ahead of its final write; a result that stays
// in items gives a zero Staged.
func (s *Store) StageResult(ctx context.Context, id string, result []byte, until time.Time) (driver.Staged, error) {
	if s.opts.Objects == nil || len(result) <= resultInline || s.inline {
		return driver.Staged{}, nil
	}
	if object, err := s.asObject(s.storedSize(result)); err != nil || !object {
		return driver.Staged{}, err
	}
	ref, err := s.putObject(ctx, id, driver.PartResult, result, until)
	if err != nil {
		return driver.Staged{}, err
	}
	return driver.Staged{Ref: ref, Bytes: len(result)}, nil
}

// putResult puts a final result of job id in its own item or object
// (until its TTL) when over resultInline, and returns the part's name (""
// for a result that stays in the job's item) and, for an object, its
// size.
func (s *Store) putResult(ctx context.Context, id string, result []byte, until time.Time) (string, int, error) {
	if len(result) <= resultInline || s.inline {
		return "", 0, nil
	}
	if !utf8.Valid(result) {
		return "", 0, fmt.Errorf("dynamostore: result of %s is not UTF-8", id)
	}
	var z []byte
	stored := len(result)
	if !s.plainlyObject(stored) {
		if z = deflate(result); z != nil {
			stored = len(z)
		}
	}
	object, err := s.asObject(stored)
	if err != nil {
		return "", 0, fmt.Errorf("dynamostore: result of %s: %w", id, err)
	}
	if object {
		ref, err := s.putObject(ctx, id, driver.PartResult, result, until)
		return ref, len(result), err
	}
	ref := payloadRef(result)
	attrs := map[string]types.AttributeValue{attrResult: &types.AttributeValueMemberS{Value: string(result)}}
	if z != nil {
		attrs = map[string]types.AttributeValue{attrPayloadZ: &types.AttributeValueMemberB{Value: z}}
	}
	return ref, 0, s.putPart(ctx, driver.PartResult, resultKey(id, ref), attrs, until)
}
