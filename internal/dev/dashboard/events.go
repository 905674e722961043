package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// eventsData is the Events page: the local bus's job events, newest
// first, and the filter.
type eventsData struct {
	Events       []eventRow
	Kind, Status string
	Limit        int
	Statuses     []string
}

// eventRow is one job event and when the bus received it.
type eventRow struct {
	jobs.Event
	Received time.Time
}

// events lists the job events the local stack's bus received (GET: the
// bus's list, read only), newest first.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Events == nil {
		s.render(w, "problem.html", http.StatusNotFound, page{Title: "Events", Nav: "events",
			Problem: "This dashboard has no event bus to read: the local stack's (make run) shows the events its bus received; a deployment's go to its EventBridge bus, where rules send them on (docs/reference/EVENTS.md)."})
		return
	}
	q := r.URL.Query()
	d := eventsData{Kind: q.Get("kind"), Status: q.Get("status"), Limit: min(max(atoiOr(q.Get("limit"), 50), 1), 500),
		Statuses: []string{string(jobs.StatusSucceeded), string(jobs.StatusFailed), string(jobs.StatusCancelled)}}
	bus := *s.cfg.Events
	query := url.Values{"limit": {strconv.Itoa(d.Limit)}}
	for k, v := range map[string]string{"kind": d.Kind, "status": d.Status} {
		if v != "" {
			query.Set(k, v)
		}
	}
	bus.RawQuery = query.Encode()
	got, err := s.readBus(r, bus.String())
	if err != nil {
		s.cfg.Log.Warn("dashboard: the event bus", slog.String("error", err.Error()))
		s.render(w, "problem.html", http.StatusBadGateway, page{Title: "Events", Nav: "events", Problem: "The local event bus did not answer: " + err.Error()})
		return
	}
	for _, ev := range got {
		row := eventRow{Received: ev.Time}
		_ = json.Unmarshal(ev.Detail, &row.Event) // a detail of another shape shows blanks
		d.Events = append(d.Events, row)
	}
	slices.Reverse(d.Events) // the bus lists them oldest first
	s.render(w, "events.html", http.StatusOK, page{Title: "Events", Nav: "events", Data: d})
}

// busEvent is what the Events page reads of an event the local bus got.
type busEvent struct {
	Detail json.RawMessage `json:"detail"`
	Time   time.Time       `json:"time"`
}

// readBus reads the local bus's events at target, oldest first.
func (s *Server) readBus(r *http.Request, target string) ([]busEvent, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.cfg.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("it answered %d", resp.StatusCode)
	}
	var got []busEvent
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&got); err != nil {
		return nil, fmt.Errorf("its answer: %w", err)
	}
	return got, nil
}
