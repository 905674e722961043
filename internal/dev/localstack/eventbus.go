package localstack

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
)

// EventBusPath is where the local event bus is served, on the gateway's
// address: the functions' EventBridge endpoint (AWS_ENDPOINT_URL_EVENTBRIDGE)
// takes PutEvents there, and GET lists the events it got (ServeHTTP).
const EventBusPath = "/_local/eventbus"

// LocalEventBus is the name the functions are told (JOBS_EVENT_BUS).
const LocalEventBus = "lambdajobs-local-events"

// EventBus stands in for EventBridge: it answers PutEvents in EventBridge's
// JSON protocol, keeps the events in memory, logs each, and hands each to
// its Webhook, if any, as a rule to an API destination would. Unlike
// EventBridge it has no rules or archive, never refuses an entry of its
// own bus (so no partial failure), and forgets everything when the stack
// stops.
type EventBus struct {
	// Calls, when set, records each PutEvents as IAM authorises it.
	Calls *iamcalls.Recorder
	Log   *slog.Logger
	// Webhook, when set, is given every event the bus takes (set it before
	// the bus serves).
	Webhook *Webhook

	mu     sync.Mutex
	events []BusEvent
	hold   func(principal string, details []string) bool
}

// SetHold makes the bus call hold with each PutEvents request's principal
// (the function that signed it, iamcalls.PrincipalOf) and its entries'
// details before it takes them. hold may block, keeping the request in
// flight (a test kills the sender while its request is held); when it
// returns false, the bus drops the request unanswered, taking nothing, as
// if it never arrived. nil stops it.
func (b *EventBus) SetHold(hold func(principal string, details []string) bool) {
	b.mu.Lock()
	b.hold = hold
	b.mu.Unlock()
}

// BusEvent is an event the local bus got. Its ID is "local-N" for the Nth
// event the bus took: the order they arrived in.
type BusEvent struct {
	ID         string          `json:"id"`
	Source     string          `json:"source"`
	DetailType string          `json:"detail_type"`
	Detail     json.RawMessage `json:"detail"`
	Time       time.Time       `json:"time"`

	// kind and status are the detail's, for GET's filters.
	kind, status string
}

// Events returns the events the bus got, oldest first.
func (b *EventBus) Events() []BusEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]BusEvent(nil), b.events...)
}

type putEntry struct {
	EventBusName, Source, DetailType, Detail string
}

type putResult struct {
	EventId      string `json:",omitempty"`
	ErrorCode    string `json:",omitempty"`
	ErrorMessage string `json:",omitempty"`
}

// ServeHTTP takes PutEvents (POST, X-Amz-Target AWSEvents.PutEvents) and
// lists the events (GET): a JSON array, oldest first, of the events whose
// detail has the kind and status the query's kind and status name (when
// given), received after the event the query's after names (a BusEvent
// ID, for following the bus), at most the newest limit of them.
func (b *EventBus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		b.list(w, r)
		return
	}
	fail := func(status int, typ string) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ})
	}
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" {
		fail(http.StatusBadRequest, "UnknownOperationException")
		return
	}
	var req struct{ Entries []putEntry }
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || len(req.Entries) == 0 || len(req.Entries) > 10 {
		fail(http.StatusBadRequest, "ValidationException")
		return
	}
	p := iamcalls.PrincipalOf(r)
	if b.Calls != nil && p != "" && p != iamcalls.Harness {
		b.Calls.Record(iamcalls.Call{Principal: p, Action: "events:PutEvents", Resource: "bus"})
	}
	b.mu.Lock()
	hold := b.hold
	b.mu.Unlock()
	if hold != nil {
		details := make([]string, len(req.Entries))
		for i, e := range req.Entries {
			details[i] = e.Detail
		}
		if !hold(p, details) {
			panic(http.ErrAbortHandler) // the connection is cut, nothing answered
		}
	}
	out := struct {
		FailedEntryCount int
		Entries          []putResult
	}{}
	var taken []BusEvent
	b.mu.Lock()
	for _, e := range req.Entries {
		if e.EventBusName != LocalEventBus || !json.Valid([]byte(e.Detail)) {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, putResult{ErrorCode: "InvalidArgument", ErrorMessage: "not the local bus, or a detail that is not JSON"})
			continue
		}
		ev := BusEvent{ID: "local-" + strconv.Itoa(len(b.events)+1), Source: e.Source, DetailType: e.DetailType, Detail: json.RawMessage(e.Detail), Time: time.Now().UTC()}
		var d struct{ Kind, Status string }
		_ = json.Unmarshal(ev.Detail, &d) // any JSON: a detail of another shape has neither
		ev.kind, ev.status = d.Kind, d.Status
		b.events = append(b.events, ev)
		taken = append(taken, ev)
		out.Entries = append(out.Entries, putResult{EventId: ev.ID})
		if b.Log != nil {
			b.Log.Info("event", slog.String("detail_type", ev.DetailType), slog.String("detail", e.Detail))
		}
	}
	b.mu.Unlock()
	for _, ev := range taken {
		b.Webhook.Send(ev) // never blocks (Webhook.Send)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

// list answers GET (see ServeHTTP).
func (b *EventBus) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, after := 0, 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			http.Error(w, "limit: want a positive number", http.StatusBadRequest)
			return
		}
		limit = n
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(v, "local-"))
		if err != nil || n < 0 || !strings.HasPrefix(v, "local-") {
			http.Error(w, "after: want an event id such as local-12", http.StatusBadRequest)
			return
		}
		after = n
	}
	kind, status := q.Get("kind"), q.Get("status")
	b.mu.Lock()
	// The Nth event is events[N-1]: those after N start at events[N].
	evs := b.events[min(after, len(b.events)):]
	out := make([]BusEvent, 0, len(evs))
	for _, ev := range evs {
		if (kind == "" || ev.kind == kind) && (status == "" || ev.status == status) {
			out = append(out, ev)
		}
	}
	b.mu.Unlock()
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(out)
}
