package examplekinds_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// example.order charges through its provider with a callback token, waits
// for the provider's answer without a worker, and ships a paid order; a
// declined payment, none in time and a provider off this machine fail
// with the kind's codes. This is how a team tests a handler that waits for
// a webhook: a provider of its own, the Runner's Service.Callback as the
// webhook's route.
func TestOrderWaitsForItsPayment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var charges []examplekinds.Charge
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c examplekinds.Charge
		if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
			http.Error(w, "bad charge", http.StatusBadRequest)
			return
		}
		mu.Lock()
		charges = append(charges, c)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer provider.Close()
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
		raw, _ := json.Marshal(examplekinds.OrderPayload{Order: order, AmountCents: 1200, Provider: providerURL, WaitMinutes: 30})
		res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "shop", Kind: examplekinds.Order, Payload: raw})
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	paid, declined, late := enqueue("o-1", provider.URL+"/charge"), enqueue("o-2", provider.URL+"/charge"), enqueue("o-3", provider.URL+"/charge")
	elsewhere := enqueue("o-4", "http://example.com/charge")
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if len(charges) != 3 {
		t.Fatalf("%d charges, want one per order on this machine", len(charges))
	}
	for _, c := range charges {
		status := map[string]string{"o-1": "paid", "o-2": "declined"}[c.Order]
		if status == "" {
			continue
		}
		if _, err := r.Service.Callback(ctx, c.CallbackToken, []byte(`{"status":"`+status+`"}`)); err != nil {
			t.Fatalf("the provider's callback for %s: %v", c.Order, err)
		}
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	r.Clock.Advance(31 * time.Minute)
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{paid: `succeeded {"order":"o-1","paid_cents":1200,"shipped":true}`, declined: "failed payment_declined",
		late: "failed payment_timeout", elsewhere: "failed invalid_order"} {
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
}
