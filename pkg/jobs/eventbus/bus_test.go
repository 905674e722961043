package eventbus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/eventbus"
)

// fakeAPI answers PutEvents: refuse[detail] is how many more times that
// entry is refused; fail fails whole requests.
type fakeAPI struct {
	requests [][]eventbus.Entry
	refuse   map[string]int
	fail     error
}

func (f *fakeAPI) PutEvents(_ context.Context, in *eventbus.PutEventsInput) (*eventbus.PutEventsOutput, error) {
	f.requests = append(f.requests, in.Entries)
	if f.fail != nil {
		return nil, f.fail
	}
	out := &eventbus.PutEventsOutput{}
	for i, e := range in.Entries {
		if f.refuse[e.Detail] > 0 {
			f.refuse[e.Detail]--
			out.FailedEntryCount++
			out.Entries = append(out.Entries, eventbus.Result{ErrorCode: "ThrottlingException"})
			continue
		}
		out.Entries = append(out.Entries, eventbus.Result{EventID: fmt.Sprint(i)})
	}
	return out, nil
}

func events(n, size int) []driver.Event {
	evs := make([]driver.Event, n)
	for i := range evs {
		evs[i] = driver.Event{DetailType: "Job Finished", Detail: []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", size)))}
	}
	return evs
}

func all(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}

func TestPutSplitsByEntriesAndBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		n, size      int
		wantRequests int
	}{
		{"25 small events: 10 to a request", 25, 10, 3},
		{"5 events of 60 KiB: 4 fit in 256 KiB", 5, 60 << 10, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			api := &fakeAPI{}
			bus := eventbus.New(api, "jobs-bus", eventbus.Options{})
			accepted, err := bus.Put(context.Background(), events(tt.n, tt.size))
			if err != nil || !all(accepted) || len(accepted) != tt.n {
				t.Fatalf("Put: %v, accepted %v", err, accepted)
			}
			if len(api.requests) != tt.wantRequests {
				t.Fatalf("%d requests, want %d", len(api.requests), tt.wantRequests)
			}
			for _, req := range api.requests {
				size := 0
				for _, e := range req {
					size += 14 + len(e.Source) + len(e.DetailType) + len(e.Detail)
					if e.EventBusName != "jobs-bus" || e.Source != eventbus.DefaultSource {
						t.Fatalf("entry bus %q source %q", e.EventBusName, e.Source)
					}
				}
				if len(req) > eventbus.MaxEntries || size > eventbus.MaxBytes {
					t.Fatalf("request of %d entries, %d bytes: over PutEvents' limits", len(req), size)
				}
			}
		})
	}
}

func TestPutRetriesRefusedEntriesAndNeverReportsThemSent(t *testing.T) {
	t.Parallel()
	evs := events(3, 1)
	api := &fakeAPI{refuse: map[string]int{string(evs[0].Detail): 1, string(evs[2].Detail): 5}}
	accepted, err := eventbus.New(api, "b", eventbus.Options{}).Put(context.Background(), evs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, false}; fmt.Sprint(accepted) != fmt.Sprint(want) {
		t.Fatalf("accepted %v, want %v (refused once: retried; refused twice: pending)", accepted, want)
	}
	if len(api.requests) != 2 || len(api.requests[1]) != 2 {
		t.Fatalf("requests %d (second of %d entries), want 2, the second with the 2 refused", len(api.requests), len(api.requests[len(api.requests)-1]))
	}
}

func TestPutRequestFailureAcceptsNothing(t *testing.T) {
	t.Parallel()
	api := &fakeAPI{fail: errors.New("AccessDeniedException")}
	accepted, err := eventbus.New(api, "b", eventbus.Options{}).Put(context.Background(), events(12, 1))
	if err == nil || len(accepted) != 12 {
		t.Fatalf("Put: %v, %d results; want an error and 12 results", err, len(accepted))
	}
	for i, a := range accepted {
		if a {
			t.Fatalf("event %d reported accepted by a failed request", i)
		}
	}
}
