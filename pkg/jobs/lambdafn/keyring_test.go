package lambdafn

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// motoSecrets starts moto_server (part of these machines' image) on a free
// loopback port and returns the SDK's Secrets Manager client for it (the
// tests' own writes) and the configuration that reaches it. No AWS
// emulator of our own speaks Secrets Manager; moto is lenient, so the test
// asserts only what AWS documents (GetSecretValue returns SecretString).
func motoSecrets(t *testing.T) (*secretsmanager.Client, aws.Config) {
	t.Helper()
	c, endpoint := motoSecretsAt(t)
	return c, aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
}

// motoSecretsAt is motoSecrets, with moto's endpoint.
func motoSecretsAt(t *testing.T) (*secretsmanager.Client, string) {
	t.Helper()
	path, err := exec.LookPath("moto_server")
	if err != nil {
		t.Fatalf("moto_server is required for the key ring test (it is part of these machines' image): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get(endpoint + "/moto-api/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("moto_server did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return secretsmanager.New(secretsmanager.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	}), endpoint
}

type cardPayload struct {
	Customer string `json:"customer"`
	Card     string `json:"card" jobs:"secret"`
}

type cardResult struct{ Last4 string }

func (r cardResult) PublicJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"last4": r.Last4})
}

// The rotation procedure: jobs sealed before a rotation still run after it,
// and an idempotent replay made after it still matches the first request.
func TestKeyRingRotation(t *testing.T) {
	ctx := context.Background()
	sm, cfg := motoSecrets(t)
	oldSecret, newSecret := strings.Repeat("o", 40), strings.Repeat("n", 40)
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("ring"), SecretString: aws.String(oldSecret)}); err != nil {
		t.Fatal(err)
	}
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	var seen string
	registry := func() *jobs.Registry { return chargeRegistry(&seen) }
	// Before the rotation: the construct's one generated secret string.
	before, err := LoadKeyRing(ctx, cfg, "ring")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := testroles.Service(jobs.Config{Registry: registry(), Store: store, Queue: queue, Sealer: before})
	if err != nil {
		t.Fatal(err)
	}
	req := jobs.EnqueueRequest{Owner: "o", Kind: "charge", Payload: []byte(`{"customer":"c","card":"4242424242424242"}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k"}}
	first, _, err := enqueued(svc.Enqueue(ctx, req))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(first.Payload), "4242") {
		t.Fatalf("the card reached the store: %s", first.Payload)
	}
	// The rotation: the ring, newest first.
	ring, _ := json.Marshal(map[string][]string{"keys": {newSecret, oldSecret}})
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("ring"), SecretString: aws.String(string(ring))}); err != nil {
		t.Fatal(err)
	}
	after, err := LoadKeyRing(ctx, cfg, "ring")
	if err != nil {
		t.Fatal(err)
	}
	svc2, err := testroles.Service(jobs.Config{Registry: registry(), Store: store, Queue: queue, Sealer: after})
	if err != nil {
		t.Fatal(err)
	}
	again, created, err := enqueued(svc2.Enqueue(ctx, req))
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("replay after the rotation: %v created=%v: want the first job", err, created)
	}
	worker, err := testroles.Worker(jobs.Config{Registry: registry(), Store: store, Sealer: after})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"job_id": first.ID})
	worker.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: string(body)}}})
	got, _ := store.Get(ctx, first.ID)
	if got.Status != jobs.StatusSucceeded || seen != "4242424242424242" {
		t.Fatalf("a job sealed before the rotation: %s, handler saw %q", got.Status, seen)
	}
	// New jobs are sealed with the new key: the old ring alone cannot open
	// them (a one-phase rotation; see TestKeyRingRotationInTwoPhases). A
	// warm instance that still holds the old ring hands such a job back
	// (waiting_on key) rather than failing it, for an instance that holds
	// the new key.
	fresh, _, err := enqueued(svc2.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "charge", Payload: []byte(`{"customer":"c","card":"5555555555554444"}`)}))
	if err != nil {
		t.Fatal(err)
	}
	oldWorker, _ := testroles.Worker(jobs.Config{Registry: registry(), Store: store, Queue: queue, Sealer: before})
	body, _ = json.Marshal(map[string]string{"job_id": fresh.ID})
	oldWorker.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m2", Body: string(body)}}})
	if got, _ := store.Get(ctx, fresh.ID); got.Status != jobs.StatusQueued || got.WaitingOn != "key" {
		t.Fatalf("a job sealed with the new key, at an instance with the old ring alone: %s %q, waiting on %q; want it handed back", got.Status, got.ErrorCode, got.WaitingOn)
	}
	worker.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m3", Body: string(body)}}})
	if got, _ := store.Get(ctx, fresh.ID); got.Status != jobs.StatusSucceeded || seen != "5555555555554444" {
		t.Fatalf("the handed-back job at an instance with the new ring: %s, handler saw %q", got.Status, seen)
	}
}

// The documented rotation, in two phases: while a warm instance still
// holds the first phase's ring (the new key decrypt-only), an instance
// cold-started on the second (the new key promoted) seals with the new
// key, and the warm one opens it. Nothing waits, nothing fails; the
// request hash of an idempotent retry matches across all three rings.
func TestKeyRingRotationInTwoPhases(t *testing.T) {
	ctx := context.Background()
	sm, cfg := motoSecrets(t)
	oldSecret, newSecret := strings.Repeat("o", 40), strings.Repeat("n", 40)
	put := func(v string) *jobs.AESSealer {
		t.Helper()
		if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String("ring2"), SecretString: aws.String(v)}); err != nil {
			t.Fatal(err)
		}
		s, err := LoadKeyRing(ctx, cfg, "ring2")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String("ring2"), SecretString: aws.String(oldSecret)}); err != nil {
		t.Fatal(err)
	}
	before, err := LoadKeyRing(ctx, cfg, "ring2")
	if err != nil {
		t.Fatal(err)
	}
	phase1 := put(`{"keys":["` + oldSecret + `"],"decrypt_only":["` + newSecret + `"]}`)
	phase2 := put(`{"keys":["` + newSecret + `","` + oldSecret + `"]}`)
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	var seen string
	registry := func() *jobs.Registry { return chargeRegistry(&seen) }
	req := jobs.EnqueueRequest{Owner: "o", Kind: "charge", Payload: []byte(`{"customer":"c","card":"4242424242424242"}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k"}}
	var first string
	for i, s := range []*jobs.AESSealer{before, phase1, phase2} {
		svc, err := testroles.Service(jobs.Config{Registry: registry(), Store: store, Queue: queue, Sealer: s})
		if err != nil {
			t.Fatal(err)
		}
		v, created, err := enqueued(svc.Enqueue(ctx, req))
		if err != nil || (i > 0 && (created || v.ID != first)) {
			t.Fatalf("ring %d: an idempotent retry: %v, created %v; want the first job", i, err, created)
		}
		first = v.ID
	}
	svc2, _ := testroles.Service(jobs.Config{Registry: registry(), Store: store, Queue: queue, Sealer: phase2})
	fresh, _, err := enqueued(svc2.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "charge", Payload: []byte(`{"customer":"c","card":"5555555555554444"}`)}))
	if err != nil {
		t.Fatal(err)
	}
	warm, _ := testroles.Worker(jobs.Config{Registry: registry(), Store: store, Queue: queue, Sealer: phase1})
	body, _ := json.Marshal(map[string]string{"job_id": fresh.ID})
	warm.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: string(body)}}})
	if got, _ := store.Get(ctx, fresh.ID); got.Status != jobs.StatusSucceeded || seen != "5555555555554444" {
		t.Fatalf("a job sealed with the promoted key at a phase-one instance: %s (waiting on %q), handler saw %q", got.Status, got.WaitingOn, seen)
	}
}

// chargeRegistry registers "charge", whose runs put the card they saw in
// *seen.
func chargeRegistry(seen *string) *jobs.Registry {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "charge", func(_ context.Context, j *jobs.Job[cardPayload]) (cardResult, error) {
		*seen = j.Payload.Card
		return cardResult{Last4: j.Payload.Card[len(j.Payload.Card)-4:]}, nil
	}, nil)
	return reg
}

func TestParseKeyRing(t *testing.T) {
	long := strings.Repeat("k", 32)
	for in, ok := range map[string]bool{
		long:                            true,
		`{"keys":["` + long + `"]}`:     true,
		`{"keys":[]}`:                   false,
		"short":                         false,
		`{"key":"` + long + `"}`:        false,
		`{"keys":["` + long + `","x"]}`: false,
		`{"keys":["` + long + `"],"decrypt_only":["` + long + `"]}`: true,
		`{"keys":["` + long + `"],"decrypt_only":["x"]}`:            false,
		`{"decrypt_only":["` + long + `"]}`:                         false,
	} {
		if _, _, err := parseKeyRing(in); (err == nil) != ok {
			t.Errorf("parseKeyRing(%.30q): %v", in, err)
		}
	}
}

// With JOBS_METRICS_NAMESPACE, building a function writes ColdStart once,
// with the function's role as the service dimension.
func TestColdStartMetric(t *testing.T) {
	var out strings.Builder
	old := metricsOut
	metricsOut = &out
	t.Cleanup(func() { metricsOut = old })
	getenv := func(k string) string {
		return map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_METRICS_NAMESPACE": "lambdajobs/test", "JOBS_FUNCTION": "getjob",
			"JOBS_PAGE_TOKEN_KEY": strings.Repeat("k", 32)}[k]
	}
	if _, err := Build(context.Background(), GetJob, jobs.NewRegistry(), getenv, nil); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out.String())), &rec); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if rec["ColdStart"] != 1.0 || rec["service"] != "getjob" || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("cold start record %s", out.String())
	}
}
