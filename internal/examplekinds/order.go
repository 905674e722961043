package examplekinds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Order shows a workflow that reads as one: it charges the order's card
// (a step, its side effect keyed by jobs.StepKey), asks for its shipping
// with a callback token (Job.CallbackToken) and waits for the carrier's
// answer for up to 3 days, sleeps a day, and sends a review e-mail (a
// step). It holds no worker while it waits or sleeps, and a run that
// crashes anywhere comes back to the step it was in. The provider, which
// has no AWS credentials, answers the shipping through POST
// /v1/callbacks/{token} with {"tracking": "..."}. Its endpoints are on
// this machine only (the local stack's tests run one): an example kind
// must not call out of a deployment.
const Order = "example.order"

// OrderPayload is example.order's payload. ShipWaitMinutes (0: 3 days)
// bounds the wait for the shipping, ReviewAfterSeconds (0: a day) is the
// sleep before the review e-mail.
type OrderPayload struct {
	Order       string `json:"order"`
	AmountCents int    `json:"amount_cents"`
	// Provider is the provider's base URL, http://127.0.0.1:<port>: it
	// answers POST /charge, /ship and /review.
	Provider           string `json:"provider"`
	ShipWaitMinutes    int    `json:"ship_wait_minutes,omitempty"`
	ReviewAfterSeconds int    `json:"review_after_seconds,omitempty"`
}

// Shipment is the payload of example.order's signal "shipped".
type Shipment struct {
	Tracking string `json:"tracking"`
}

// OrderResult is a shipped and reviewed order.
type OrderResult struct {
	Order    string `json:"order"`
	Charge   string `json:"charge"`
	Tracking string `json:"tracking"`
	Reviewed bool   `json:"reviewed"`
}

// ProviderCall is what example.order sends each of its provider's
// endpoints: the order, the step's idempotency key (the provider does
// each side effect once per key), and for /ship the callback token that
// answers it.
type ProviderCall struct {
	Order          string `json:"order"`
	AmountCents    int    `json:"amount_cents,omitempty"`
	IdempotencyKey string `json:"idempotency_key"`
	CallbackToken  string `json:"callback_token,omitempty"`
}

// example.order's failures: a bad payload, no shipping in time.
const (
	CodeInvalidOrder = "invalid_order"
	CodeNotShipped   = "not_shipped"
)

// OrderOpts are example.order's options: its signal, its codes, and
// retries for a provider that does not answer.
var OrderOpts = jobs.KindOpts{
	FailureCodes: []string{CodeInvalidOrder, CodeNotShipped},
	Signals:      map[string]any{"shipped": Shipment{}},
	Retry:        jobs.RetryPolicy{MaxAttempts: 10, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second},
}

// RunOrder runs example.order.
func RunOrder(ctx context.Context, job *jobs.Job[OrderPayload]) (jobs.JSON[OrderResult], error) {
	p := job.Payload
	wait, after := time.Duration(p.ShipWaitMinutes)*time.Minute, time.Duration(p.ReviewAfterSeconds)*time.Second
	if wait == 0 {
		wait = 72 * time.Hour
	}
	if after == 0 {
		after = 24 * time.Hour
	}
	u, err := url.Parse(p.Provider)
	if p.Order == "" || p.AmountCents < 1 || wait < 0 || wait > 72*time.Hour || after < 0 || after > 7*24*time.Hour ||
		err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" {
		return jobs.JSON[OrderResult]{}, jobs.Fail(CodeInvalidOrder, errors.New("order, amount, wait or provider out of range"))
	}
	charge, err := jobs.Step(ctx, job, "charge", func(ctx context.Context) (string, error) {
		var out struct {
			Charge string `json:"charge"`
		}
		return out.Charge, callProvider(ctx, p.Provider+"/charge", ProviderCall{Order: p.Order, AmountCents: p.AmountCents, IdempotencyKey: jobs.StepKey(ctx)}, &out)
	})
	if err != nil {
		return jobs.JSON[OrderResult]{}, jobs.Retry(err)
	}
	if _, err := jobs.Step(ctx, job, "ship", func(ctx context.Context) (bool, error) {
		token, err := job.CallbackToken("shipped", wait)
		if err != nil {
			return false, err
		}
		return true, callProvider(ctx, p.Provider+"/ship", ProviderCall{Order: p.Order, IdempotencyKey: jobs.StepKey(ctx), CallbackToken: token}, nil)
	}); err != nil {
		return jobs.JSON[OrderResult]{}, jobs.Retry(err)
	}
	shipped, ok, err := jobs.WaitForSignal[Shipment](ctx, job, "shipped", wait)
	switch {
	case err != nil:
		return jobs.JSON[OrderResult]{}, err
	case !ok:
		return jobs.JSON[OrderResult]{}, jobs.Fail(CodeNotShipped, nil)
	}
	if err := job.Sleep(ctx, "a day later", after); err != nil {
		return jobs.JSON[OrderResult]{}, err
	}
	if _, err := jobs.Step(ctx, job, "review", func(ctx context.Context) (bool, error) {
		return true, callProvider(ctx, p.Provider+"/review", ProviderCall{Order: p.Order, IdempotencyKey: jobs.StepKey(ctx)}, nil)
	}); err != nil {
		return jobs.JSON[OrderResult]{}, jobs.Retry(err)
	}
	return jobs.JSON[OrderResult]{V: OrderResult{Order: p.Order, Charge: charge, Tracking: shipped.Tracking, Reviewed: true}}, nil
}

// callProvider posts call to url and decodes a 2xx answer into out (nil:
// ignored).
func callProvider(ctx context.Context, url string, call ProviderCall, out any) error {
	body, _ := json.Marshal(call)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the provider answered %d", resp.StatusCode)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// OrderProvider is a payment, shipping and e-mail provider for
// example.order on this machine, as the tests run one: it does each side
// effect once per idempotency key (a repeated call answers as the first
// did), counts the calls and the side effects by endpoint, and hands over
// each shipping it is asked for, with its callback token, on Shipping.
type OrderProvider struct {
	Shipping chan ProviderCall
	mu       sync.Mutex
	calls    map[string]int
	effects  map[string]int
	charges  map[string]string // idempotency key: the charge it made
}

// NewOrderProvider returns an OrderProvider whose Shipping holds up to 64.
func NewOrderProvider() *OrderProvider {
	return &OrderProvider{Shipping: make(chan ProviderCall, 64), calls: map[string]int{}, effects: map[string]int{}, charges: map[string]string{}}
}

// ServeHTTP answers POST /charge, /ship and /review.
func (p *OrderProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var c ProviderCall
	endpoint := strings.TrimPrefix(r.URL.Path, "/")
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil || c.IdempotencyKey == "" || r.Method != http.MethodPost ||
		(endpoint != "charge" && endpoint != "ship" && endpoint != "review") || (endpoint == "ship") != (c.CallbackToken != "") {
		http.Error(w, "bad call", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[endpoint]++
	key := endpoint + "/" + c.IdempotencyKey
	charge, done := p.charges[key]
	if !done {
		p.effects[endpoint]++
		charge = "ch-" + c.Order
		p.charges[key] = charge
		if endpoint == "ship" {
			p.Shipping <- c
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"charge": charge})
}

// Counts are the calls and the side effects so far, by endpoint.
func (p *OrderProvider) Counts() (calls, effects map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls), maps.Clone(p.effects)
}
