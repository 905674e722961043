package examplekinds_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// example.order charges, asks for its shipping with a callback token,
// waits for the carrier without a worker, sleeps a day and sends a review
// e-mail: one side effect per step. An order not shipped in 3 days and a
// provider off this machine fail with the kind's codes. This is how a
// team tests a workflow that waits for a webhook: a provider of its own,
// the Runner's Service.Callback as the webhook's route, its Clock for the
// waits.
func TestOrderWorkflow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	provider := examplekinds.NewOrderProvider()
	srv := httptest.NewServer(provider)
	defer srv.Close()
	reg := jobs.NewRegistry()
	if _, err := examplekinds.Register(reg); err != nil {
		t.Fatal(err)
	}
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(order, providerURL string) string {
		t.Helper()
		raw, _ := json.Marshal(examplekinds.OrderPayload{Order: order, AmountCents: 1200, Provider: providerURL})
		res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "shop", Kind: examplekinds.Order, Payload: raw})
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	shipped, lost, elsewhere := enqueue("o-1", srv.URL), enqueue("o-2", srv.URL), enqueue("o-3", "http://example.com")
	work := func() {
		t.Helper()
		if _, err := r.Work(ctx); err != nil {
			t.Fatal(err)
		}
	}
	work()
	for range 2 {
		call := <-provider.Shipping
		if call.Order == "o-1" {
			if _, err := r.Service.Callback(ctx, call.CallbackToken, []byte(`{"tracking":"1Z999"}`)); err != nil {
				t.Fatalf("the carrier's callback: %v", err)
			}
		}
	}
	work()
	if v, _ := r.Service.Get(ctx, "shop", shipped); v.WaitingOn != "sleep" {
		t.Fatalf("the shipped order: %s on %q, want its sleep before the review", v.Status, v.WaitingOn)
	}
	r.Clock.Advance(24 * time.Hour)
	work()
	r.Clock.Advance(48 * time.Hour)
	work()
	for id, want := range map[string]string{shipped: `succeeded {"order":"o-1","charge":"ch-o-1","tracking":"1Z999","reviewed":true}`,
		lost: "failed not_shipped", elsewhere: "failed invalid_order"} {
		v, err := r.Service.Get(ctx, "shop", id)
		if err != nil {
			t.Fatal(err)
		}
		got := string(v.Status) + " " + string(v.Result)
		if v.Error != nil {
			got = string(v.Status) + " " + *v.Error
		}
		if got != want {
			t.Errorf("order %s: %s, want %s", id, got, want)
		}
	}
	if _, effects := provider.Counts(); effects["charge"] != 2 || effects["ship"] != 2 || effects["review"] != 1 {
		t.Fatalf("side effects %v: want each order's charge and shipping once, the shipped one's review once", effects)
	}
}
