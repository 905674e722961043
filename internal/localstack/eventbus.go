package localstack

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/iamcalls"
)

// EventBusPath is where the local event bus is served, on the gateway's
// address: the functions' EventBridge endpoint (AWS_ENDPOINT_URL_EVENTBRIDGE)
// takes PutEvents there, and GET lists the events it got.
const EventBusPath = "/_local/eventbus"

// LocalEventBus is the name the functions are told (JOBS_EVENT_BUS).
const LocalEventBus = "lambdajobs-local-events"

// EventBus stands in for EventBridge: it answers PutEvents in EventBridge's
// JSON protocol, keeps the events in memory, and logs each. Unlike
// EventBridge it has no rules, targets or retries, never refuses an entry
// of its own bus (so no partial failure), and forgets everything when the
// stack stops.
type EventBus struct {
	// Calls, when set, records each PutEvents as IAM authorises it.
	Calls *iamcalls.Recorder
	Log   *slog.Logger

	mu     sync.Mutex
	events []BusEvent
}

// BusEvent is an event the local bus got.
type BusEvent struct {
	ID         string          `json:"id"`
	Source     string          `json:"source"`
	DetailType string          `json:"detail_type"`
	Detail     json.RawMessage `json:"detail"`
	Time       time.Time       `json:"time"`
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

func (b *EventBus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(b.Events())
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
	if p := iamcalls.PrincipalOf(r); b.Calls != nil && p != "" && p != iamcalls.Harness {
		b.Calls.Record(iamcalls.Call{Principal: p, Action: "events:PutEvents", Resource: "bus"})
	}
	out := struct {
		FailedEntryCount int
		Entries          []putResult
	}{}
	b.mu.Lock()
	for _, e := range req.Entries {
		if e.EventBusName != LocalEventBus || !json.Valid([]byte(e.Detail)) {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, putResult{ErrorCode: "InvalidArgument", ErrorMessage: "not the local bus, or a detail that is not JSON"})
			continue
		}
		ev := BusEvent{ID: "local-" + strconv.Itoa(len(b.events)+1), Source: e.Source, DetailType: e.DetailType, Detail: json.RawMessage(e.Detail), Time: time.Now().UTC()}
		b.events = append(b.events, ev)
		out.Entries = append(out.Entries, putResult{EventId: ev.ID})
		if b.Log != nil {
			b.Log.Info("event", slog.String("detail_type", ev.DetailType), slog.String("detail", e.Detail))
		}
	}
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}
