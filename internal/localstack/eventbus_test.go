package localstack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/lambdajobs/lambdajobs/internal/localstack"
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
	client := eventbridge.New(eventbridge.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL + localstack.EventBusPath),
		Credentials: aws.AnonymousCredentials{}})
	evs := []driver.Event{{DetailType: "Job Finished", Detail: []byte(`{"id":"a/1"}`)}, {DetailType: "Job Finished", Detail: []byte(`{"id":"b/1"}`)}}
	accepted, err := eventbus.New(client, localstack.LocalEventBus, eventbus.Options{}).Put(context.Background(), evs)
	if err != nil || len(accepted) != 2 || !accepted[0] || !accepted[1] {
		t.Fatalf("Put: %v %v", accepted, err)
	}
	got := bus.Events()
	if len(got) != 2 || string(got[1].Detail) != `{"id":"b/1"}` || got[0].Source != eventbus.DefaultSource || got[0].DetailType != "Job Finished" {
		t.Fatalf("events %+v", got)
	}
	accepted, err = eventbus.New(client, "another-bus", eventbus.Options{}).Put(context.Background(), evs[:1])
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
