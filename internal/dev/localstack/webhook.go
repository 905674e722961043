package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The local webhook's defaults: the tries, the backoff and the timeout of
// one try. EventBridge's own retry policy for an API destination is up to
// 185 tries over 24 hours (docs/reference/EVENTS.md's recipe keeps it); locally a
// target gets about a minute to come up.
const (
	webhookAttempts   = 8
	webhookBackoff    = 500 * time.Millisecond
	webhookMaxBackoff = 30 * time.Second
	// webhookTimeout is an API destination's: EventBridge times out a
	// request after 5 seconds, and retries it.
	webhookTimeout = 5 * time.Second
	// webhookBacklog bounds the events waiting for a delivery; beyond it
	// an event is dropped (and logged), never waited for.
	webhookBacklog = 1000
	// webhookWorkers is how many deliveries run at once, so one event's
	// backoff does not hold the others.
	webhookWorkers = 4
)

// The headers of each delivery: EventBridge's own for an API destination
// (User-Agent, Content-Type), and the one docs/reference/EVENTS.md's recipe adds as
// a header parameter ($.detail.id).
const (
	webhookUserAgent   = "Amazon/EventBridge/ApiDestinations"
	webhookContentType = "application/json; charset=utf-8"
	webhookIDHeader    = "Idempotency-Key"
)

// ParseWebhook checks the URL of a local webhook target: http or https, on
// this machine (a loopback address, or localhost). The events carry owners
// and results: the local stack never sends them elsewhere.
func ParseWebhook(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("webhook %q: want an http(s) URL such as http://127.0.0.1:9000/hook", raw)
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); !strings.EqualFold(host, "localhost") && (err != nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("webhook %q: the local bus posts only to this machine (a loopback address such as 127.0.0.1, or localhost), not to %s", raw, host)
	}
	return u, nil
}

// Webhook POSTs each event the local bus takes to one URL, as an
// EventBridge rule whose target is an API destination does with
// docs/reference/EVENTS.md's recipe: the event's detail (the job event) as the body,
// with EventBridge's User-Agent and Content-Type and the recipe's
// Idempotency-Key (the event's id). A try that ends in a connection error,
// a timeout (5 s, as API destinations), 429 or a 5xx is retried with
// exponential backoff and jitter, up to Attempts tries; any other answer
// ends the delivery, as API destinations decide (a 3xx is not followed).
// Deliveries run apart from the bus, from a bounded backlog: a slow or
// failing target never blocks the bus, so never a worker's PutEvents.
// Every connection it makes goes to a loopback address, whatever the
// URL's name resolves to.
type Webhook struct {
	URL *url.URL
	// Attempts bounds the tries per event (default 8); Backoff is the
	// wait before the first retry (default 500 ms), doubled at each retry
	// up to MaxBackoff (default 30 s), each wait drawn between half of it
	// and all of it.
	Attempts            int
	Backoff, MaxBackoff time.Duration
	Log                 *slog.Logger

	once    sync.Once
	backlog chan BusEvent
	client  *http.Client

	delivered, failed, dropped, tries atomic.Int64
}

// WebhookStats counts what a Webhook did: events delivered (a 2xx),
// failed (an answer that is not retried, or every try spent), dropped (the
// backlog was full), and the requests it sent.
type WebhookStats struct {
	Delivered, Failed, Dropped, Tries int64
}

// Stats returns what the webhook did so far.
func (w *Webhook) Stats() WebhookStats {
	return WebhookStats{w.delivered.Load(), w.failed.Load(), w.dropped.Load(), w.tries.Load()}
}

func (w *Webhook) init() {
	w.once.Do(func() {
		w.backlog = make(chan BusEvent, webhookBacklog)
		dialer := &net.Dialer{Timeout: webhookTimeout, Control: loopbackOnly}
		w.client = &http.Client{
			Timeout: webhookTimeout,
			// Never through a proxy, and never dialling another machine.
			Transport: &http.Transport{Proxy: nil, DialContext: dialer.DialContext, MaxIdleConnsPerHost: webhookWorkers},
			// A 3xx ends the delivery, as API destinations do: nothing
			// follows a redirect elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		if w.Attempts <= 0 {
			w.Attempts = webhookAttempts
		}
		if w.Backoff <= 0 {
			w.Backoff = webhookBackoff
		}
		if w.MaxBackoff <= 0 {
			w.MaxBackoff = webhookMaxBackoff
		}
		if w.Log == nil {
			w.Log = slog.New(slog.DiscardHandler)
		}
	})
}

// loopbackOnly refuses a connection to anything but a loopback address.
func loopbackOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.Unmap().IsLoopback() {
		return fmt.Errorf("webhook: %s is not a loopback address", host)
	}
	return nil
}

// Send queues ev for delivery and returns at once; with the backlog full,
// it drops ev (logged and counted). A nil Webhook does nothing.
func (w *Webhook) Send(ev BusEvent) {
	if w == nil {
		return
	}
	w.init()
	select {
	case w.backlog <- ev:
	default:
		w.dropped.Add(1)
		w.Log.Warn("webhook: backlog full, event dropped", slog.String("event_id", eventID(ev)), slog.Int("backlog", webhookBacklog))
	}
}

// Run delivers the queued events until ctx ends.
func (w *Webhook) Run(ctx context.Context) {
	w.init()
	var wg sync.WaitGroup
	for range webhookWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case ev := <-w.backlog:
					w.deliver(ctx, ev)
				}
			}
		}()
	}
	wg.Wait()
}

// deliver sends ev until a try ends the delivery or the tries are spent.
func (w *Webhook) deliver(ctx context.Context, ev BusEvent) {
	id, key := eventID(ev), detailID(ev)
	wait := w.Backoff
	for try := 1; ; try++ {
		status, err := w.post(ctx, ev, key)
		switch {
		case err == nil && status >= 200 && status < 300:
			w.delivered.Add(1)
			w.Log.Info("webhook: event delivered", slog.String("event_id", id), slog.Int("status", status), slog.Int("try", try))
			return
		case err == nil && status != http.StatusTooManyRequests && status < 500:
			w.failed.Add(1)
			w.Log.Warn("webhook: event refused, not retried (as an API destination)", slog.String("event_id", id), slog.Int("status", status), slog.Int("try", try))
			return
		case try >= w.Attempts:
			w.failed.Add(1)
			w.Log.Warn("webhook: event not delivered, every try spent", slog.String("event_id", id), slog.Int("tries", try), slog.Int("status", status), slog.String("error", errText(err)))
			return
		}
		pause := wait/2 + rand.N(wait/2+1)
		w.Log.Warn("webhook: try failed, retrying", slog.String("event_id", id), slog.Int("try", try), slog.Int("status", status),
			slog.String("error", errText(err)), slog.Duration("retry_in", pause))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, w.MaxBackoff)
	}
}

// post sends one try, with key as its Idempotency-Key (none when empty);
// it returns the answer's status, or the error that left it without one.
// The answer's body is read and dropped: it is the target's, never logged.
func (w *Webhook) post(ctx context.Context, ev BusEvent, key string) (int, error) {
	w.tries.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL.String(), bytes.NewReader(ev.Detail))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", webhookContentType)
	req.Header.Set("User-Agent", webhookUserAgent)
	if key != "" {
		req.Header.Set(webhookIDHeader, key)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// detailID is the id of the event's detail (a job event's), as the
// recipe's $.detail.id reads it; empty when it has none.
func detailID(ev BusEvent) string {
	var d struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(ev.Detail, &d) != nil {
		return ""
	}
	return d.ID
}

// eventID names ev in the logs: its detail's id, else the bus's own.
func eventID(ev BusEvent) string {
	if id := detailID(ev); id != "" {
		return id
	}
	return ev.ID
}

// errText describes a try's transport error: a timeout, or the error.
func errText(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return err.Error()
}
