package eventbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/eventbus"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// fakeAPI answers PutEvents: refuse[detail] is how many more times that
// entry is refused; fail fails whole requests.
type fakeAPI struct {
	requests [][]types.PutEventsRequestEntry
	refuse   map[string]int
	fail     error
}

func (f *fakeAPI) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	f.requests = append(f.requests, in.Entries)
	if f.fail != nil {
		return nil, f.fail
	}
	out := &eventbridge.PutEventsOutput{}
	for i, e := range in.Entries {
		if d := aws.ToString(e.Detail); f.refuse[d] > 0 {
			f.refuse[d]--
			out.FailedEntryCount++
			out.Entries = append(out.Entries, types.PutEventsResultEntry{ErrorCode: aws.String("ThrottlingException")})
			continue
		}
		out.Entries = append(out.Entries, types.PutEventsResultEntry{EventId: aws.String(fmt.Sprint(i))})
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
			bus := eventbus.New(api, "jobs-bus", eventbus.Config{})
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
					size += 14 + len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail))
					if aws.ToString(e.EventBusName) != "jobs-bus" || aws.ToString(e.Source) != eventbus.DefaultSource {
						t.Fatalf("entry bus %q source %q", aws.ToString(e.EventBusName), aws.ToString(e.Source))
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
	accepted, err := eventbus.New(api, "b", eventbus.Config{}).Put(context.Background(), evs)
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
	accepted, err := eventbus.New(api, "b", eventbus.Config{}).Put(context.Background(), events(12, 1))
	if err == nil || len(accepted) != 12 {
		t.Fatalf("Put: %v, %d results; want an error and 12 results", err, len(accepted))
	}
	for i, a := range accepted {
		if a {
			t.Fatalf("event %d reported accepted by a failed request", i)
		}
	}
}

// The bus sends through the SDK's EventBridge client: one signed JSON 1.1
// PutEvents request of the entries, and EventBridge's answer read back,
// an entry it refused put once more.
func TestPutThroughTheSDKClient(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" || !strings.Contains(r.Header.Get("Authorization"), "/us-east-1/events/aws4_request") {
			t.Errorf("request target %q, authorization %q", r.Header.Get("X-Amz-Target"), r.Header.Get("Authorization"))
		}
		mu.Lock()
		bodies = append(bodies, string(body))
		first := len(bodies) == 1
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		if first {
			_, _ = io.WriteString(w, `{"FailedEntryCount":1,"Entries":[{"EventId":"e1"},{"ErrorCode":"ThrottlingException","ErrorMessage":"slow down"}]}`)
			return
		}
		_, _ = io.WriteString(w, `{"FailedEntryCount":0,"Entries":[{"EventId":"e2"}]}`)
	}))
	defer srv.Close()
	client := eventbridge.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", "")})
	at := time.Date(2026, 12, 1, 8, 0, 0, 250e6, time.UTC)
	bus := eventbus.New(client, "jobs-bus", eventbus.Config{Clock: jobstest.NewClock(at)})
	accepted, err := bus.Put(context.Background(), events(2, 1))
	if err != nil || fmt.Sprint(accepted) != "[true true]" {
		t.Fatalf("Put: %v, accepted %v", err, accepted)
	}
	if len(bodies) != 2 {
		t.Fatalf("%d requests, want 2 (the refused entry once more)", len(bodies))
	}
	var req struct {
		Entries []struct {
			EventBusName, Source, DetailType, Detail string
			Time                                     float64
		}
	}
	if err := json.Unmarshal([]byte(bodies[0]), &req); err != nil {
		t.Fatal(err)
	}
	if len(req.Entries) != 2 {
		t.Fatalf("first request: %s", bodies[0])
	}
	e := req.Entries[1]
	if e.EventBusName != "jobs-bus" || e.Source != eventbus.DefaultSource || e.DetailType != "Job Finished" || e.Detail != `{"n":1,"pad":"x"}` || e.Time != 1796112000.25 {
		t.Fatalf("entry %+v", e)
	}
	if !strings.Contains(bodies[1], `{\"n\":1,`) || strings.Contains(bodies[1], `{\"n\":0,`) {
		t.Fatalf("second request %s: want only the refused entry", bodies[1])
	}
}
