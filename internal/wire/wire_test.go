package wire_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
)

func TestFireMessagesRoundTrip(t *testing.T) {
	for _, f := range []wire.Fire{
		{Schedule: "nightly", ScheduledTime: "2026-12-01T00:00:00Z"},
		{Schedule: "report", OwnerKey: wire.OwnerKey("alice"), ScheduledTime: wire.ScheduledTimeAttribute},
	} {
		body := wire.EncodeFire(f)
		got, ok := wire.DecodeFire(body)
		if !ok || got != f {
			t.Errorf("DecodeFire(EncodeFire(%+v)) = %+v, %v", f, got, ok)
		}
	}
	// Scheduler replaces the attribute only when it is written as is.
	if body := wire.FireMessage("n", wire.ScheduledTimeAttribute); !strings.Contains(body, `"<aws.scheduler.scheduled-time>"`) || strings.HasSuffix(body, "\n") {
		t.Errorf("FireMessage = %q: want the attribute unescaped and no newline", body)
	}
	if got, want := wire.RuntimeFireMessage("k", "n", "t"), `{"lambdajobs_schedule":"n","owner_key":"k","scheduled_time":"t"}`; got != want {
		t.Errorf("RuntimeFireMessage = %s, want %s", got, want)
	}
}

func TestDecodeFireRefusesOtherBodies(t *testing.T) {
	for _, body := range []string{
		``,
		`not json`,
		`{}`,
		`{"lambdajobs_schedule":""}`,
		`{"lambdajobs_schedule":"n","extra":1}`,
		`{"lambdajobs_schedule":5}`,
		`{"job_id":"x"}`,
		`["lambdajobs_schedule"]`,
	} {
		if f, ok := wire.DecodeFire(body); ok || f != (wire.Fire{}) {
			t.Errorf("DecodeFire(%q) = %+v, %v; want nothing, false", body, f, ok)
		}
	}
}

var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-([0-9a-f])[0-9a-f]{3}-([89ab])[0-9a-f]{3}-[0-9a-f]{12}$`)

func TestIDs(t *testing.T) {
	before := time.Now().Add(-time.Millisecond)
	id := wire.NewID()
	if m := canonicalUUID.FindStringSubmatch(id); m == nil || m[1] != "7" || !wire.ValidID(id) {
		t.Fatalf("NewID() = %q: want a valid UUIDv7", id)
	}
	if at, ok := wire.IDTime(id); !ok || at.Before(before) || at.After(time.Now().Add(time.Millisecond)) {
		t.Fatalf("IDTime(%s) = %v, %v; want about now", id, at, ok)
	}

	d := wire.DerivedID("ns", "a", "b")
	if m := canonicalUUID.FindStringSubmatch(d); m == nil || m[1] != "8" || !wire.ValidID(d) {
		t.Fatalf("DerivedID = %q: want a valid UUIDv8", d)
	}
	if _, ok := wire.IDTime(d); ok {
		t.Fatalf("IDTime of a derived id: want false")
	}
	if wire.DerivedID("ns", "a", "b") != d {
		t.Fatal("DerivedID changed for the same input")
	}
	distinct := []string{d, wire.DerivedID("ns", "ab"), wire.DerivedID("ns", "a", "b", ""), wire.DerivedID("ns2", "a", "b"), wire.DerivedID("nsa", "b"),
		wire.BatchJobID("b1", 0), wire.BatchJobID("b1", 1), wire.BatchJobID("b2", 0), wire.CompletionJobID("b1")}
	for i, x := range distinct {
		if slices.Index(distinct, x) != i {
			t.Fatalf("ids %d and %d are the same: %s", slices.Index(distinct, x), i, x)
		}
	}

	at := time.Date(2026, 12, 1, 8, 30, 0, 0, time.UTC)
	if wire.FireJobID("n", at) != wire.FireJobID("n", at.In(time.FixedZone("x", 3600))) {
		t.Error("FireJobID depends on the time's zone")
	}
	if wire.FireJobID("n", at) == wire.FireJobID("n", at.Add(time.Minute)) || wire.FireJobID("n", at) == wire.RuntimeFireJobID("", "n", at) {
		t.Error("fire job ids collide")
	}
}

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		wire.NewID():                            true,
		"01a23cca-f63e-7833-98d1-5253837907ae":  true,
		"01A23CCA-F63E-7833-98D1-5253837907AE":  false, // upper case
		"01a23ccaf63e783398d15253837907ae":      false, // no dashes
		"{01a23cca-f63e-7833-98d1-5253837907a}": false,
		"01a23cca-f63e-7833-98d1-5253837907ag":  false,
		"01a23cca-f63e-7833-98d1-5253837907a":   false,
		"":                                      false,
		"../../etc/passwd":                      false,
	} {
		if got := wire.ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
	for _, id := range []string{"", "x", "01a23cca-f63e-8833-98d1-5253837907ae"} {
		if _, ok := wire.IDTime(id); ok {
			t.Errorf("IDTime(%q): want false", id)
		}
	}
}

func TestOwnersAndTenants(t *testing.T) {
	k := wire.OwnerKey("arn:aws:iam::123456789012:role/team")
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(k) || k == wire.OwnerKey("arn:aws:iam::123456789012:role/team2") || k != wire.OwnerKey("arn:aws:iam::123456789012:role/team") {
		t.Fatalf("OwnerKey = %q: want 32 hex digits, the same for the same owner only", k)
	}
	if got := wire.SchedulerName(k, "nightly"); got != k[:16]+"-nightly" {
		t.Errorf("SchedulerName = %q", got)
	}
	if g := wire.GroupID("alice"); !strings.HasPrefix(g, "t") || len(g) > 128 || g == wire.GroupID(wire.TenantOf("alice", "bob")) {
		t.Errorf("GroupID = %q: want a t and a hash, apart from a tenant's", g)
	}
	for _, tc := range []struct{ owner, tenant, want string }{
		{"alice", "", "alice"},
		{"alice", "alice", "alice"},
		{"alice", "bob", "alice\nbob"},
	} {
		if got := wire.TenantOf(tc.owner, tc.tenant); got != tc.want {
			t.Errorf("TenantOf(%q, %q) = %q, want %q", tc.owner, tc.tenant, got, tc.want)
		}
	}
	if wire.TenantOf("alice", "bob") == wire.TenantOf("bob", "") {
		t.Error("alice's tenant bob is bob")
	}
	for owner, want := range map[string]bool{
		"alice": true,
		"arn:aws:iam::1:role/x with spaces ~!@#$%": true,
		strings.Repeat("o", wire.MaxOwnerBytes):    true,
		strings.Repeat("o", wire.MaxOwnerBytes+1):  false,
		"":          false,
		"ali\nce":   false,
		"ali\x00ce": false,
		"alicé":     false,
		"ali\x7fce": false,
	} {
		if got := wire.ValidOwner(owner); got != want {
			t.Errorf("ValidOwner(%q) = %v, want %v", owner, got, want)
		}
	}
}

func TestShapesNameKeysNeverValues(t *testing.T) {
	for _, tc := range []struct {
		body string
		max  int
		want []string
		ok   bool
	}{
		{`{"b":"secret","a":1}`, 8, []string{"a", "b"}, true},
		{`{"c":1,"b":2,"a":3}`, 2, []string{"a", "b"}, true},
		{`{"` + strings.Repeat("k", 40) + `":1}`, 8, []string{strings.Repeat("k", 32) + "…"}, true},
		{`{}`, 8, []string{}, true},
		{`[{"a":1}]`, 8, nil, false},
		{`"a"`, 8, nil, false},
		{`{"a":1,"A":2}`, 8, nil, false}, // refused by jsonin.Check
		{`{"a":`, 8, nil, false},
	} {
		got, ok := wire.TopLevelKeys(tc.body, tc.max)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("TopLevelKeys(%s, %d) = %q, %v; want %q, %v", tc.body, tc.max, got, ok, tc.want, tc.ok)
		}
	}
	if got, want := wire.DescribeShape(`{"token":"hunter2"}`), "JSON object of 19 bytes with keys [token]"; got != want {
		t.Errorf("DescribeShape = %q, want %q", got, want)
	}
	if got, want := wire.DescribeShape("password=hunter2"), "non-JSON body of 16 bytes"; got != want {
		t.Errorf("DescribeShape = %q, want %q", got, want)
	}
}

func TestTraceHeader(t *testing.T) {
	ctx := context.Background()
	if got := wire.TraceHeader(ctx); got != "" {
		t.Fatalf("TraceHeader of a context carrying no span = %q, want empty", got)
	}
	ctx = wire.WithSpanHeader(ctx, func(context.Context) string { return "Root=1-abc;Parent=def;Sampled=1" })
	if got := wire.TraceHeader(ctx); got != "Root=1-abc;Parent=def;Sampled=1" {
		t.Fatalf("TraceHeader = %q, want the span's header", got)
	}
}

// Whatever a queue message's body, MessageSort names one of the sorts
// without panicking; a body DecodeFire takes is a fire, and encodes back
// to a body it takes the same.
func FuzzMessageSort(f *testing.F) {
	for _, seed := range []string{`{"job_id":"x"}`, wire.FireMessage("n", "t"), `{"Records":[{}]}`, `{"Type":"Notification","TopicArn":"a"}`,
		`{"id":"1","source":"s","detail-type":"d","detail":{}}`, `{"kind":"k","idempotency_key":"a"}`, `not json`, `{"a":1,"A":2}`} {
		f.Add(seed)
	}
	sorts := []string{wire.SortJob, wire.SortFire, wire.SortS3, wire.SortEventBridge, wire.SortSNS, wire.SortEnvelope, wire.SortEnvelopeWithoutKey, wire.SortOther}
	f.Fuzz(func(t *testing.T, body string) {
		sort := wire.MessageSort(body)
		if !slices.Contains(sorts, sort) {
			t.Fatalf("MessageSort(%q) = %q, not a sort", body, sort)
		}
		fire, ok := wire.DecodeFire(body)
		if !ok {
			return
		}
		if again, ok := wire.DecodeFire(wire.EncodeFire(fire)); !ok || again != fire {
			t.Fatalf("fire %+v of %q does not round-trip: %+v, %v", fire, body, again, ok)
		}
		if sort != wire.SortFire && sort != wire.SortOther {
			t.Fatalf("MessageSort(%q) = %q for a fire", body, sort)
		}
	})
}
