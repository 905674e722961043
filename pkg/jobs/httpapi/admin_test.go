package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// The admin routes: an operator reads and acts on any owner's jobs; anyone
// else gets 403 before anything is read, for known and unknown ids alike.
func TestAdminRoutes(t *testing.T) {
	e := newEnv(t)
	opOwner, _ := httpapi.Owner(caller(t, "other", http.MethodGet, "/", nil, ""))
	meOwner, _ := httpapi.Owner(caller(t, "me", http.MethodGet, "/", nil, ""))
	e.reconfigure(func(c *httpapi.Config) { c.Operators = []string{opOwner} })
	mine := e.enqueueAs(t, "me", "a").ID
	e.fail(t, mine)
	// A caller who is not an operator.
	for _, path := range []string{"/v1/admin/jobs", "/v1/admin/jobs/" + mine, "/v1/admin/jobs/00000000-0000-0000-0000-000000000000"} {
		if p := decodeProblem(t, e.route(t, caller(t, "me", http.MethodGet, path, map[string]string{"owner": "x"}, ""))); p.Status != http.StatusForbidden || p.Code != "forbidden" {
			t.Errorf("GET %s by a non-operator: %+v", path, p)
		}
	}
	if p := decodeProblem(t, e.route(t, caller(t, "me", http.MethodPost, "/v1/admin/jobs/"+mine+"/retry", nil, ""))); p.Status != http.StatusForbidden {
		t.Errorf("retry by a non-operator: %+v", p)
	}
	// The operator.
	l := decodeList(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs", map[string]string{"owner": meOwner, "status": "failed"}, "")))
	if len(l.Jobs) != 1 || l.Jobs[0].ID != mine {
		t.Fatalf("the operator's listing of another owner's failed jobs: %+v", l)
	}
	if p := decodeProblem(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs", nil, ""))); p.Status != http.StatusBadRequest {
		t.Fatalf("an admin listing without owner: %+v", p)
	}
	resp := e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs/"+mine, nil, ""))
	var v struct {
		Job struct {
			ID      string
			Payload map[string]string
		}
		Owner string
	}
	if err := json.Unmarshal([]byte(resp.Body), &v); resp.StatusCode != http.StatusOK || err != nil || v.Job.ID != mine || v.Owner != meOwner || v.Job.Payload["text"] != "a" {
		t.Fatalf("the operator's read: %d %s", resp.StatusCode, resp.Body)
	}
	if r := e.route(t, caller(t, "other", http.MethodPost, "/v1/admin/jobs/"+mine+"/retry", nil, "")); r.StatusCode != http.StatusOK {
		t.Fatalf("the operator's retry: %d %s", r.StatusCode, r.Body)
	}
	if r := e.route(t, caller(t, "other", http.MethodPost, "/v1/admin/jobs/"+mine+"/cancel", nil, "")); r.StatusCode != http.StatusOK {
		t.Fatalf("the operator's cancel: %d %s", r.StatusCode, r.Body)
	}
	if v, _ := e.svcGet(t, "me", mine); v.Status != "cancelled" {
		t.Fatalf("the owner sees %s", v.Status)
	}
	if p := decodeProblem(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs/00000000-0000-0000-0000-000000000000", nil, ""))); p.Status != http.StatusNotFound {
		t.Fatalf("an unknown id for the operator: %+v", p)
	}
	// Without operators, nobody.
	e.reconfigure(func(c *httpapi.Config) { c.Operators = nil })
	if p := decodeProblem(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs/"+mine, nil, ""))); p.Status != http.StatusForbidden {
		t.Fatalf("with no operators: %+v", p)
	}
}

// Operators are configured as the docs say, by their role's ARN (with or
// without a path): every session of that role is an operator, as it
// arrives (arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION); no other role,
// account or user is.
func TestOperatorsByRoleARN(t *testing.T) {
	e := newEnv(t)
	id := e.enqueueAs(t, "me", "a").ID
	get := func() int {
		return e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs/"+id, nil, "")).StatusCode
	}
	for _, tt := range []struct {
		operators []string
		want      int
	}{
		{[]string{"arn:aws:iam::123456789012:role/billing-service"}, http.StatusOK},
		{[]string{"arn:aws:iam::123456789012:role/teams/payments/billing-service"}, http.StatusOK},
		{[]string{"arn:aws:sts::123456789012:assumed-role/billing-service"}, http.StatusOK},
		{[]string{" arn:aws:iam::123456789012:role/oncall", "arn:aws:iam::123456789012:role/billing-service "}, http.StatusOK},
		{[]string{"arn:aws:iam::123456789012:role/billing"}, http.StatusForbidden},
		{[]string{"arn:aws:iam::210987654321:role/billing-service"}, http.StatusForbidden},
		{[]string{"arn:aws:iam::123456789012:user/billing-service"}, http.StatusForbidden},
		{[]string{"arn:aws:iam::123456789012:role/"}, http.StatusForbidden},
	} {
		e.reconfigure(func(c *httpapi.Config) { c.Operators = tt.operators })
		if got := get(); got != tt.want {
			t.Errorf("operators %q: the role's session gets %d, want %d", tt.operators, got, tt.want)
		}
	}
}

// fakeDeadLetters is the dead-letter queue in memory.
type fakeDeadLetters struct {
	letters  []sqsqueue.DeadLetter
	redriven []string
	calls    int
}

func (f *fakeDeadLetters) Depths(context.Context) (sqsqueue.Depths, error) {
	f.calls++
	return sqsqueue.Depths{Queue: 3, DeadLetters: len(f.letters)}, nil
}

func (f *fakeDeadLetters) Peek(_ context.Context, max int) ([]sqsqueue.DeadLetter, error) {
	f.calls++
	return f.letters[:min(max, len(f.letters))], nil
}

func (f *fakeDeadLetters) Redrive(_ context.Context, id string) error {
	f.calls++
	for i, l := range f.letters {
		if l.ID == id {
			f.letters = slices.Delete(f.letters, i, i+1)
			f.redriven = append(f.redriven, id)
			return nil
		}
	}
	return sqsqueue.ErrNoSuchDeadLetter
}

func (f *fakeDeadLetters) RedriveAll(context.Context) (int, error) {
	f.calls++
	n := len(f.letters)
	for _, l := range f.letters {
		f.redriven = append(f.redriven, l.ID)
	}
	f.letters = nil
	return n, nil
}

// The dead-letter routes: operators only (anyone else 403 before the queue
// is touched); depths, a peek by shape, a redrive of one or of all.
func TestDeadLetterRoutes(t *testing.T) {
	e := newEnv(t)
	dl := &fakeDeadLetters{letters: []sqsqueue.DeadLetter{{ID: "m1", Shape: "JSON object of 9 bytes with keys [a]"}, {ID: "m2"}, {ID: "m3"}}}
	opOwner, _ := httpapi.Owner(caller(t, "other", http.MethodGet, "/", nil, ""))
	e.reconfigure(func(c *httpapi.Config) { c.Operators, c.DeadLetters = []string{opOwner}, dl })
	post := func(who, path, body string) events.APIGatewayV2HTTPResponse {
		req := caller(t, who, http.MethodPost, path, nil, body)
		req.Headers["content-type"] = "application/json"
		return e.route(t, req)
	}
	for _, path := range []string{"/peek", "/redrive"} {
		if r := post("me", "/v1/admin/dead-letters"+path, `{"all":true}`); r.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s by a non-operator: %d", path, r.StatusCode)
		}
	}
	if r := e.route(t, caller(t, "me", http.MethodGet, "/v1/admin/dead-letters", nil, "")); r.StatusCode != http.StatusForbidden {
		t.Errorf("GET depths by a non-operator: %d", r.StatusCode)
	}
	if dl.calls != 0 {
		t.Fatalf("the queue was touched %d times for non-operators", dl.calls)
	}
	r := e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/dead-letters", nil, ""))
	if r.StatusCode != http.StatusOK || r.Body != `{"queue":3,"dead_letters":3}` {
		t.Errorf("depths: %d %s", r.StatusCode, r.Body)
	}
	r = post("other", "/v1/admin/dead-letters"+"/peek", `{"max":2}`)
	var peeked httpapi.Peeked
	if err := json.Unmarshal([]byte(r.Body), &peeked); r.StatusCode != http.StatusOK || err != nil || len(peeked.DeadLetters) != 2 || peeked.DeadLetters[0].Shape == "" {
		t.Errorf("peek: %d %s", r.StatusCode, r.Body)
	}
	for _, body := range []string{`{"max":51}`, `{"max":-1}`, `{"id":"m1","all":true}`, `{}`, `{"nope":1}`, `[`} {
		path := "/redrive"
		if strings.Contains(body, "max") {
			path = "/peek"
		}
		if r := post("other", "/v1/admin/dead-letters"+path, body); r.StatusCode != http.StatusBadRequest {
			t.Errorf("POST %s %s: %d %s, want 400", path, body, r.StatusCode, r.Body)
		}
	}
	if r := post("other", "/v1/admin/dead-letters"+"/redrive", `{"id":"m2"}`); r.StatusCode != http.StatusOK || r.Body != `{"redriven":1,"more":false}` {
		t.Errorf("redrive one: %d %s", r.StatusCode, r.Body)
	}
	if p := decodeProblem(t, post("other", "/v1/admin/dead-letters"+"/redrive", `{"id":"m2"}`)); p.Status != http.StatusNotFound {
		t.Errorf("redrive a message that is gone: %+v", p)
	}
	if r := post("other", "/v1/admin/dead-letters"+"/redrive", `{"all":true}`); r.StatusCode != http.StatusOK || r.Body != `{"redriven":2,"more":false}` {
		t.Errorf("redrive all: %d %s", r.StatusCode, r.Body)
	}
	if !slices.Equal(dl.redriven, []string{"m2", "m1", "m3"}) {
		t.Errorf("redriven %v", dl.redriven)
	}
	if r := e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/dead-letters"+"/redrive", nil, "")); r.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET redrive: %d, want 405 (no GET changes anything)", r.StatusCode)
	}
	// A deployment without dead-letter routes.
	e.reconfigure(func(c *httpapi.Config) { c.DeadLetters = nil })
	if r := e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/dead-letters", nil, "")); r.StatusCode != http.StatusNotFound {
		t.Errorf("without dead letters: %d", r.StatusCode)
	}
}

// deadLettersOnFakeSQS is a DeadLetters over SQS in memory with a bulk lane:
// in the default lane's DLQ, a job reference in group tabc (sent by the
// worker) and an envelope planted by an insider; in the bulk lane's, a job
// reference. It returns the envelope's message id.
func deadLettersOnFakeSQS() (*sqsqueue.DeadLetters, *testenv.FakeSQS, string) {
	f := &testenv.FakeSQS{}
	f.Plant("dlq", `{"job_id":"`+wire.NewID()+`"}`, "AROAWORKER:worker", "tabc")
	env := f.Plant("dlq", `{"kind":"echo","payload":{},"idempotency_key":"k"}`, "AIDAINSIDER", "")
	f.Plant("dlq-bulk", `{"job_id":"`+wire.NewID()+`"}`, "AROAWORKER:worker-bulk", "")
	return &sqsqueue.DeadLetters{SQS: f, QueueURL: "queue", DLQURL: "dlq",
		LaneQueueURLs: map[string]string{"bulk": "queue-bulk"}, LaneDLQURLs: map[string]string{"bulk": "dlq-bulk"}}, f, env
}

// The dead-letter routes name the lane in requests and answers, show each
// dead letter's sort and sender, and redrive only job references unless
// asked for any shape: a planted envelope stays in the dead-letter queue
// through a redrive of all, which says it skipped it and why.
func TestDeadLetterRoutesServeLanesAndRefuseForgedShapes(t *testing.T) {
	e := newEnv(t)
	dl, f, env := deadLettersOnFakeSQS()
	opOwner, _ := httpapi.Owner(caller(t, "other", http.MethodGet, "/", nil, ""))
	e.reconfigure(func(c *httpapi.Config) { c.Operators, c.DeadLetters = []string{opOwner}, dl })
	post := func(path, body string) events.APIGatewayV2HTTPResponse {
		req := caller(t, "other", http.MethodPost, "/v1/admin/dead-letters"+path, nil, body)
		req.Headers["content-type"] = "application/json"
		return e.route(t, req)
	}
	if r := e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/dead-letters", nil, "")); r.Body != `{"queue":0,"dead_letters":2,"lanes":{"bulk":0},"lane_dead_letters":{"bulk":1}}` {
		t.Errorf("depths: %s", r.Body)
	}
	var peeked httpapi.Peeked
	r := post("/peek", `{}`)
	if err := json.Unmarshal([]byte(r.Body), &peeked); err != nil || len(peeked.DeadLetters) != 2 || strings.Contains(r.Body, `"lane"`) {
		t.Fatalf("peek the default lane: %d %s", r.StatusCode, r.Body)
	}
	for _, p := range peeked.DeadLetters {
		if (p.ID == env) != (p.Sender == "AIDAINSIDER" && p.Sort == "envelope" && p.Redrive == sqsqueue.RedriveOnlyAnyShape) {
			t.Errorf("dead letter %+v", p)
		}
	}
	if r := post("/peek", `{"lane":"bulk"}`); !strings.HasPrefix(r.Body, `{"lane":"bulk","dead_letters":[{`) || !strings.Contains(r.Body, `"sender":"AROAWORKER:worker-bulk"`) {
		t.Fatalf("peek the bulk lane: %d %s", r.StatusCode, r.Body)
	}

	r = post("/redrive", `{"all":true}`)
	var res httpapi.RedriveAnswer
	if err := json.Unmarshal([]byte(r.Body), &res); err != nil || res.Redriven != 1 || res.More || len(res.Skipped) != 1 ||
		res.Skipped[0].Sort != "envelope" || res.Skipped[0].Count != 1 || !strings.Contains(res.Skipped[0].Why, `"shapes": "any"`) {
		t.Fatalf("redrive all: %d %s", r.StatusCode, r.Body)
	}
	if got := f.IDs("dlq"); !slices.Equal(got, []string{env}) || len(f.Sent) != 1 || *f.Sent[0].QueueUrl != "queue" || *f.Sent[0].MessageGroupId != "tabc" {
		t.Fatalf("after a redrive of all the DLQ holds %v and %d were sent; want the envelope left and the job reference sent in its group", got, len(f.Sent))
	}
	if p := decodeProblem(t, post("/redrive", `{"id":"`+env+`"}`)); p.Status != http.StatusConflict || p.Code != "not_redrivable" {
		t.Errorf("redrive the envelope by id: %+v", p)
	}
	if r := post("/redrive", `{"all":true,"lane":"bulk"}`); r.Body != `{"lane":"bulk","redriven":1,"more":false}` || *f.Sent[len(f.Sent)-1].QueueUrl != "queue-bulk" {
		t.Errorf("redrive the bulk lane: %d %s", r.StatusCode, r.Body)
	}
	for _, body := range []string{`{"all":true,"lane":"urgent"}`, `{"all":true,"lane":"default"}`, `{"all":true,"lane":"Bulk"}`, `{"all":true,"shapes":"some"}`} {
		if p := decodeProblem(t, post("/redrive", body)); p.Status != http.StatusBadRequest {
			t.Errorf("redrive %s: %+v, want 400", body, p)
		}
	}
	if p := decodeProblem(t, post("/peek", `{"lane":"urgent"}`)); p.Status != http.StatusBadRequest {
		t.Errorf("peek an unknown lane: %+v, want 400", p)
	}
	if len(f.Sent) != 2 {
		t.Fatalf("%d sends, want 2", len(f.Sent))
	}
	if r := post("/redrive", `{"id":"`+env+`","shapes":"any"}`); r.Body != `{"redriven":1,"more":false}` || len(f.IDs("dlq")) != 0 {
		t.Errorf("redrive the envelope by id with any shape: %d %s", r.StatusCode, r.Body)
	}
}
