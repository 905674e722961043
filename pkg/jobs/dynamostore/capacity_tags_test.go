package dynamostore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// TestWriteUnitsPerTag pins what tags cost (docs/evidence/CAPACITY.md): each tag
// one write unit, once, at creation (its index entry, which never
// changes), and nothing at the claim or the final write: three tags of
// the longest keep a small job's item under a kilobyte (a payload near
// the inline limit goes to its own item sooner: the limit counts the
// tags' bytes). A job without tags pays nothing.
func TestWriteUnitsPerTag(t *testing.T) {
	client := testenv.DynamoDB(t)
	log := &capacityLog{}
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{OnCapacity: log.record})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	owner := "arn:aws:iam::123456789012:user/alice"
	life := func(tags map[string]string) (create, rest float64) {
		t.Helper()
		sum := func(ops ...string) float64 {
			var u float64
			for _, op := range ops {
				u += log.table[op] + log.index[op]
			}
			return u
		}
		c0, r0 := sum("create"), sum("claim", "finish")
		rec := &driver.Record{ID: wire.NewID(), Kind: "k", Owner: owner, Status: jobs.StatusQueued, Payload: []byte(`{}`),
			CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(time.Minute), Tags: tags}
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		tok := wire.NewID()
		if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: tok, At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := store.Finish(ctx, rec.ID, tok, driver.Outcome{Status: jobs.StatusSucceeded, At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		return sum("create") - c0, sum("claim", "finish") - r0
	}
	long := func(c byte) string { return strings.Repeat(string(c), 64) }
	baseCreate, baseRest := life(nil)
	for _, c := range []struct {
		name string
		tags map[string]string
	}{
		{"one tag", map[string]string{"import": "42"}},
		{"three short tags", map[string]string{"import": "42", "customer": "acme", "release": "2026-12-05"}},
		{"three tags of the longest", map[string]string{
			strings.Repeat("a", 32): long('x'), strings.Repeat("b", 32): long('y'), strings.Repeat("c", 32): long('z')}},
	} {
		create, rest := life(c.tags)
		t.Logf("%s: creation %g write units (%g without tags), claim and finish %g (%g)", c.name, create, baseCreate, rest, baseRest)
		if create != baseCreate+float64(len(c.tags)) || rest != baseRest {
			t.Errorf("%s: creation %g and claim+finish %g write units; want %g and %g (one unit a tag, once)", c.name, create, rest,
				baseCreate+float64(len(c.tags)), baseRest)
		}
	}
}

// TestTagListingReadsOnlyTheTagged: 1,000 jobs tagged import=42, listed
// by that tag in pages of 100, cost the same read units among 5,000 of
// the owner's other jobs as among 50,000 (untagged, or tagged otherwise,
// and another owner's with the same tag): the listing reads the tag's
// index entries and the tagged jobs, never the others.
func TestTagListingReadsOnlyTheTagged(t *testing.T) {
	client := testenv.DynamoDB(t)
	log := &capacityLog{}
	table := testenv.NewTable(t, client)
	store := dynamostore.New(client, table, dynamostore.Config{OnCapacity: log.record})
	ctx := context.Background()
	start := time.Now().Truncate(time.Millisecond)
	owner, other := "arn:aws:iam::123456789012:role/imports", "arn:aws:iam::123456789012:role/billing"
	n := 0
	put := func(count int, owner string, tags func(i int) map[string]string) {
		t.Helper()
		items := make([]map[string]types.AttributeValue, 0, count)
		for i := range count {
			n++
			created := start.Add(time.Duration(n) * time.Millisecond)
			rec := &driver.Record{ID: wire.DerivedID("tag-test", owner, fmt.Sprint(n)), Kind: "k", Owner: owner, Status: jobs.StatusQueued,
				Payload: []byte(`{}`), CreatedAt: created, UpdatedAt: created, SweepAt: created.Add(time.Hour), Tags: tags(i)}
			w, err := store.TransactPut(rec)
			if err != nil {
				t.Fatal(err)
			}
			items = append(items, w[0].Put.Item)
		}
		batchWrite(t, client, table, items)
	}
	// The tagged, every 10th with two more tags (so import=42 is found in
	// the second tag index too); then the others.
	put(1000, owner, func(i int) map[string]string {
		if i%10 == 0 {
			return map[string]string{"import": "42", "customer": fmt.Sprint(i % 7), "a": "b"}
		}
		return map[string]string{"import": "42"}
	})
	others := func(count int) {
		put(count*8/10, owner, func(i int) map[string]string {
			if i%2 == 0 {
				return map[string]string{"import": fmt.Sprint(43 + i%5)}
			}
			return nil
		})
		put(count/10, owner, func(int) map[string]string { return map[string]string{"import": "4", "release": "42"} })
		put(count/10, other, func(int) map[string]string { return map[string]string{"import": "42"} })
	}
	key := wire.OwnerKey(owner)
	listAll := func() (pages int, units float64) {
		t.Helper()
		seen := map[string]bool{}
		after := ""
		for {
			before := log.table["list"] + log.index["list"] + log.table["list_get"]
			page, err := store.List(ctx, driver.ListQuery{OwnerKey: key, Tag: "import=42", Limit: 100, After: after})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			units += log.table["list"] + log.index["list"] + log.table["list_get"] - before
			for _, r := range page.Records {
				if r.Owner != owner || r.Tags["import"] != "42" || seen[r.ID] {
					t.Fatalf("page %d listed %s of %s tagged %v (seen %v)", pages, r.ID, r.Owner, r.Tags, seen[r.ID])
				}
				seen[r.ID] = true
			}
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		if len(seen) != 1000 {
			t.Fatalf("%d tagged jobs listed, want 1000", len(seen))
		}
		return pages, units
	}
	others(5000)
	pages5, units5 := listAll()
	others(45000)
	pages50, units50 := listAll()
	t.Logf("1,000 tagged among 5,000 others: %d pages, %g read units; among 50,000: %d pages, %g read units", pages5, units5, pages50, units50)
	if pages5 != pages50 || units5 != units50 {
		t.Errorf("the others changed the cost of listing the tagged: %d pages for %g units, then %d for %g", pages5, units5, pages50, units50)
	}
	// One unit a job read, and half a unit an index query: each of the
	// tag's partitions (ListShards in each of TagSlots indexes) read at
	// most twice a page.
	if budget := float64(1000 + pages5*2*dynamostore.TagSlots*dynamostore.ListShards/2); units5 > budget {
		t.Errorf("%g read units, want at most %g", units5, budget)
	}
}

// batchWrite writes items 25 a request, 8 requests at once.
func batchWrite(t *testing.T, client *dynamodb.Client, table string, items []map[string]types.AttributeValue) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	chunks := make(chan []map[string]types.AttributeValue)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for chunk := range chunks {
				var reqs []types.WriteRequest
				for _, it := range chunk {
					reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
				}
				for len(reqs) > 0 {
					out, err := client.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
					if err != nil {
						errs <- err
						return
					}
					reqs = out.UnprocessedItems[table]
				}
			}
		}()
	}
	for len(items) > 0 {
		k := min(25, len(items))
		chunks <- items[:k]
		items = items[k:]
	}
	close(chunks)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
