package examplekinds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Order shows an order workflow that waits for a payment provider's
// webhook: a step asks the provider to charge the order, handing it a
// callback token (Job.CallbackToken) and the step's idempotency key; the
// handler then waits for the signal "payment" for up to WaitMinutes,
// holding no worker, and a last step ships a paid order. The provider,
// which has no AWS credentials, answers with POST
// /v1/callbacks/{token} and {"status": "paid"} or {"status": "declined"}.
// The provider is a URL on this machine only (the local stack's tests run
// one): an example kind must not call out of a deployment.
const Order = "example.order"

// OrderPayload is example.order's payload.
type OrderPayload struct {
	Order       string `json:"order"`
	AmountCents int    `json:"amount_cents"`
	// Provider is the charge endpoint, http://127.0.0.1:<port>/...
	Provider    string `json:"provider"`
	WaitMinutes int    `json:"wait_minutes"`
}

// Payment is the payload of example.order's signal "payment".
type Payment struct {
	Status string `json:"status"` // "paid" or "declined"
}

// OrderResult is a shipped order.
type OrderResult struct {
	Order     string `json:"order"`
	PaidCents int    `json:"paid_cents"`
	Shipped   bool   `json:"shipped"`
}

// Charge is what example.order sends its provider.
type Charge struct {
	Order       string `json:"order"`
	AmountCents int    `json:"amount_cents"`
	// CallbackToken delivers the payment's answer: POST
	// /v1/callbacks/{token}.
	CallbackToken  string `json:"callback_token"`
	IdempotencyKey string `json:"idempotency_key"`
}

// example.order's failures: a bad payload, a declined payment, none in
// time.
const (
	CodeInvalidOrder    = "invalid_order"
	CodePaymentDeclined = "payment_declined"
	CodePaymentTimeout  = "payment_timeout"
)

// OrderOpts are example.order's options: its signal, its codes, and
// retries for a provider that does not answer.
var OrderOpts = jobs.KindOpts{
	FailureCodes: []string{CodeInvalidOrder, CodePaymentDeclined, CodePaymentTimeout},
	Signals:      map[string]any{"payment": Payment{}},
	Retry:        jobs.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second},
}

// RunOrder runs example.order.
func RunOrder(ctx context.Context, job *jobs.Job[OrderPayload]) (jobs.JSON[OrderResult], error) {
	p := job.Payload
	u, err := url.Parse(p.Provider)
	if p.Order == "" || p.AmountCents < 1 || p.WaitMinutes < 1 || p.WaitMinutes > 1440 ||
		err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" {
		return jobs.JSON[OrderResult]{}, jobs.Fail(CodeInvalidOrder, errors.New("order, amount, wait or provider out of range"))
	}
	if _, err := jobs.Step(ctx, job, "charge", func(ctx context.Context) (bool, error) {
		token, err := job.CallbackToken("payment", time.Duration(p.WaitMinutes)*time.Minute)
		if err != nil {
			return false, err
		}
		body, _ := json.Marshal(Charge{Order: p.Order, AmountCents: p.AmountCents, CallbackToken: token, IdempotencyKey: jobs.StepKey(ctx)})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Provider, bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return false, fmt.Errorf("the provider answered %d", resp.StatusCode)
		}
		return true, nil
	}); err != nil {
		return jobs.JSON[OrderResult]{}, jobs.Retry(err)
	}
	pay, ok, err := jobs.WaitForSignal[Payment](ctx, job, "payment", time.Duration(p.WaitMinutes)*time.Minute)
	switch {
	case err != nil:
		return jobs.JSON[OrderResult]{}, err
	case !ok:
		return jobs.JSON[OrderResult]{}, jobs.Fail(CodePaymentTimeout, nil)
	case pay.Status != "paid":
		return jobs.JSON[OrderResult]{}, jobs.Fail(CodePaymentDeclined, nil)
	}
	shipped, err := jobs.Step(ctx, job, "ship", func(ctx context.Context) (bool, error) {
		return true, nil // here a real handler books the shipment, keyed by jobs.StepKey(ctx)
	})
	if err != nil {
		return jobs.JSON[OrderResult]{}, jobs.Retry(err)
	}
	return jobs.JSON[OrderResult]{V: OrderResult{Order: p.Order, PaidCents: p.AmountCents, Shipped: shipped}}, nil
}
