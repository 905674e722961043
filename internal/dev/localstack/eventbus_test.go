package localstack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/eventbus"
)

// The local bus answers the SDK's own PutEvents at the endpoint the
// functions are given (the gateway's address and EventBusPath), keeps the
// events, lists them, and refuses an entry for another bus as
// EventBridge would (a partial failure).
func TestLocalEventBusSpeaksPutEvents(t *testing.T) {
	t.Parallel()
	bus := &localstack.EventBus{}
	mux := http.NewServeMux()
	mux.Handle(localstack.EventBusPath, bus)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := eventbridge.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL + localstack.EventBusPath),
		Credentials: aws.AnonymousCredentials{}})
	evs := []driver.Event{{DetailType: "Job Finished", Detail: []byte(`{"id":"a/1"}`)}, {DetailType: "Job Finished", Detail: []byte(`{"id":"b/1"}`)}}
	accepted, err := eventbus.New(client, localstack.LocalEventBus, eventbus.Config{}).Put(context.Background(), evs)
	if err != nil || len(accepted) != 2 || !accepted[0] || !accepted[1] {
		t.Fatalf("Put: %v %v", accepted, err)
	}
	got := bus.Events()
	if len(got) != 2 || string(got[1].Detail) != `{"id":"b/1"}` || got[0].Source != eventbus.DefaultSource || got[0].DetailType != "Job Finished" {
		t.Fatalf("events %+v", got)
	}
	accepted, err = eventbus.New(client, "another-bus", eventbus.Config{}).Put(context.Background(), evs[:1])
	if err != nil || accepted[0] {
		t.Fatalf("an entry for another bus: accepted %v, %v; want refused", accepted, err)
	}
	resp, err := http.Get(srv.URL + localstack.EventBusPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var listed []localstack.BusEvent
	if err := json.NewDecoder(resp.Body).Decode(&listed); err != nil || len(listed) != 2 {
		t.Fatalf("GET %s: %d events, %v", localstack.EventBusPath, len(listed), err)
	}
}

// putDetails puts one event per detail on the bus served at base, as the
// functions do.
func putDetails(t *testing.T, base string, details ...string) {
	t.Helper()
	client := eventbridge.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(base + localstack.EventBusPath),
		Credentials: aws.AnonymousCredentials{}})
	evs := make([]driver.Event, len(details))
	for i, d := range details {
		evs[i] = driver.Event{DetailType: "Job Finished", Detail: []byte(d)}
	}
	if accepted, err := eventbus.New(client, localstack.LocalEventBus, eventbus.Config{}).Put(context.Background(), evs); err != nil || len(accepted) != len(evs) {
		t.Fatalf("Put: %v %v", accepted, err)
	}
}

// GET filters on the detail's kind and status, keeps what came after an
// event (for following the bus) and the newest limit, oldest first; a
// malformed filter is a 400.
func TestLocalEventBusListFilters(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle(localstack.EventBusPath, &localstack.EventBus{})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	putDetails(t, srv.URL,
		`{"id":"a/1","kind":"k1","status":"failed"}`, `{"id":"b/1","kind":"k2","status":"succeeded"}`,
		`{"id":"c/1","kind":"k1","status":"succeeded"}`, `{"id":"d/1","kind":"k1","status":"failed"}`, `"not an object"`)
	for query, want := range map[string][]string{
		"":                         {"local-1", "local-2", "local-3", "local-4", "local-5"},
		"?kind=k1":                 {"local-1", "local-3", "local-4"},
		"?kind=k1&status=failed":   {"local-1", "local-4"},
		"?status=succeeded":        {"local-2", "local-3"},
		"?limit=2":                 {"local-4", "local-5"},
		"?kind=k1&limit=1":         {"local-4"},
		"?after=local-3":           {"local-4", "local-5"},
		"?after=local-3&kind=k2":   {},
		"?after=local-0&limit=1":   {"local-5"},
		"?after=local-9":           {},
		"?kind=nope&status=failed": {},
	} {
		resp, err := http.Get(srv.URL + localstack.EventBusPath + query)
		if err != nil {
			t.Fatal(err)
		}
		var got []localstack.BusEvent
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		ids := []string{}
		for _, ev := range got {
			ids = append(ids, ev.ID)
		}
		if err != nil || resp.StatusCode != http.StatusOK || strings.Join(ids, ",") != strings.Join(want, ",") {
			t.Errorf("GET %s: %d %v %v, want %v", query, resp.StatusCode, ids, err, want)
		}
	}
	for _, query := range []string{"?limit=0", "?limit=x", "?after=12", "?after=local-x"} {
		resp, err := http.Get(srv.URL + localstack.EventBusPath + query)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", query, resp.StatusCode)
		}
	}
}
