package awsjson

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"
	smithytracing "github.com/aws/smithy-go/tracing"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// captured is one request a test server got.
type captured struct {
	method, path string
	header       http.Header
	body         []byte
}

// server answers every request with the next of answers (the last one
// repeats) and keeps what it got.
type server struct {
	mu      sync.Mutex
	got     []captured
	answers []answer
}

type answer struct {
	status int
	header map[string]string
	body   string
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.got = append(s.got, captured{r.Method, r.URL.Path, r.Header.Clone(), body})
	a := s.answers[min(len(s.got), len(s.answers))-1]
	s.mu.Unlock()
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (s *server) requests() []captured {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

func (s *server) reset(answers ...answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got, s.answers = nil, answers
}

var testCreds = credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "session-token")

// A request is the SDK client's: the same method, path (under an endpoint
// with a path of its own), content type, target, session token, body and
// signing scope, and a signature over every header it sends. The SDK adds
// only its own telemetry headers (amz-sdk-invocation-id, amz-sdk-request)
// and its User-Agent.
func TestRequestsAreTheSDKs(t *testing.T) {
	srv := &server{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	base := ts.URL + "/under/a/path"
	at := time.Date(2026, 12, 2, 10, 30, 0, 123e6, time.UTC)
	cases := []struct {
		name   string
		answer string
		sdk    func() error
		ours   func() error
	}{
		{"EventBridge.PutEvents", `{"FailedEntryCount":0,"Entries":[{"EventId":"e-1"}]}`,
			func() error {
				c := eventbridge.New(eventbridge.Options{Region: "eu-west-1", BaseEndpoint: aws.String(base), Credentials: testCreds})
				_, err := c.PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{
					EventBusName: aws.String("bus"), Source: aws.String("lambdajobs"), DetailType: aws.String("Job Finished"),
					Detail: aws.String(`{"id":"a"}`), Time: aws.Time(at)}}})
				return err
			},
			func() error {
				c := New(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(base), Credentials: testCreds}, EventBridge)
				var out struct{ Entries []struct{ EventId string } }
				in := map[string]any{"Entries": []map[string]any{{"EventBusName": "bus", "Source": "lambdajobs", "DetailType": "Job Finished",
					"Detail": `{"id":"a"}`, "Time": float64(at.UnixMilli()) / 1e3}}}
				if err := c.Call(context.Background(), "PutEvents", in, &out); err != nil {
					return err
				}
				if len(out.Entries) != 1 || out.Entries[0].EventId != "e-1" {
					t.Errorf("answer decoded as %+v", out)
				}
				return nil
			}},
		{"Secrets Manager.GetSecretValue", `{"ARN":"arn:aws:secretsmanager:eu-west-1:1:secret:s","Name":"s","SecretString":"v","CreatedDate":1.7e9}`,
			func() error {
				c := secretsmanager.New(secretsmanager.Options{Region: "eu-west-1", BaseEndpoint: aws.String(base), Credentials: testCreds})
				_, err := c.GetSecretValue(context.Background(), &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")})
				return err
			},
			func() error {
				c := New(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(base), Credentials: testCreds}, SecretsManager)
				var out struct{ SecretString string }
				if err := c.Call(context.Background(), "GetSecretValue", map[string]string{"SecretId": "s"}, &out); err != nil {
					return err
				}
				if out.SecretString != "v" {
					t.Errorf("answer decoded as %+v", out)
				}
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.reset(answer{status: 200, body: tc.answer})
			if err := tc.sdk(); err != nil {
				t.Fatal(err)
			}
			if err := tc.ours(); err != nil {
				t.Fatal(err)
			}
			got := srv.requests()
			if len(got) != 2 {
				t.Fatalf("%d requests", len(got))
			}
			sdk, ours := got[0], got[1]
			if ours.method != sdk.method || ours.path != sdk.path {
				t.Errorf("request %s %s, the SDK's %s %s", ours.method, ours.path, sdk.method, sdk.path)
			}
			for _, h := range []string{"Content-Type", "X-Amz-Target", "X-Amz-Security-Token"} {
				if ours.header.Get(h) != sdk.header.Get(h) || sdk.header.Get(h) == "" {
					t.Errorf("%s: %q, the SDK's %q", h, ours.header.Get(h), sdk.header.Get(h))
				}
			}
			var a, b any
			if json.Unmarshal(ours.body, &a) != nil || json.Unmarshal(sdk.body, &b) != nil || !reflect.DeepEqual(a, b) {
				t.Errorf("body %s, the SDK's %s", ours.body, sdk.body)
			}
			oursScope, oursSigned := authParts(t, ours.header.Get("Authorization"))
			sdkScope, sdkSigned := authParts(t, sdk.header.Get("Authorization"))
			if !slices.Equal(oursScope, sdkScope) {
				t.Errorf("credential scope %v, the SDK's %v", oursScope, sdkScope)
			}
			sdkSigned = slices.DeleteFunc(sdkSigned, func(h string) bool { return strings.HasPrefix(h, "amz-sdk-") })
			if !slices.Equal(oursSigned, sdkSigned) {
				t.Errorf("signed headers %v, the SDK's (but its own) %v", oursSigned, sdkSigned)
			}
			// The signature is over the request as it arrived.
			when, err := time.Parse("20060102T150405Z", ours.header.Get("X-Amz-Date"))
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(ours.method, ts.URL+ours.path, strings.NewReader(string(ours.body)))
			for _, h := range oursSigned {
				if h != "host" {
					req.Header.Set(h, ours.header.Get(h))
				}
			}
			req.Header.Del("Authorization")
			creds, _ := testCreds.Retrieve(context.Background())
			svc := EventBridge
			if strings.HasPrefix(tc.name, "Secrets") {
				svc = SecretsManager
			}
			if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hexSHA256(ours.body), svc.SigningName, "eu-west-1", when); err != nil {
				t.Fatal(err)
			}
			if req.Header.Get("Authorization") != ours.header.Get("Authorization") {
				t.Errorf("signature %s, recomputed %s", ours.header.Get("Authorization"), req.Header.Get("Authorization"))
			}
		})
	}
}

// authParts splits a SigV4 Authorization header into its credential scope
// (key id, date, region, service, "aws4_request") and signed headers.
func authParts(t *testing.T, auth string) ([]string, []string) {
	t.Helper()
	var cred, signed string
	for _, part := range strings.Split(strings.TrimPrefix(auth, "AWS4-HMAC-SHA256 "), ", ") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		}
	}
	if cred == "" || signed == "" {
		t.Fatalf("Authorization %q", auth)
	}
	return strings.Split(cred, "/"), strings.Split(signed, ";")
}

// A service's error is the SDK's: the same error chain and text, its
// code without the namespace, retried when the SDK retries it (a throttle,
// a 5xx: three attempts in all, then MaxAttemptsError) and not when it
// does not (a validation error).
func TestErrorsAndRetriesAreTheSDKs(t *testing.T) {
	srv := &server{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), Credentials: testCreds,
		// No waits between attempts.
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = retry.BackoffDelayerFunc(noDelay) })
		}}
	sdk := secretsmanager.NewFromConfig(cfg)
	ours := New(cfg, SecretsManager)
	for _, tc := range []struct {
		name     string
		answers  []answer
		code     string
		attempts int
	}{
		{"throttled, then answered", []answer{{status: 400, body: `{"__type":"com.amazonaws.secretsmanager#ThrottlingException","message":"slow down"}`}, {status: 200, body: `{"SecretString":"v"}`}}, "", 2},
		{"throttled every time", []answer{{status: 400, body: `{"__type":"ThrottlingException","message":"slow down"}`}}, "ThrottlingException", 3},
		{"server errors", []answer{{status: 503, header: map[string]string{"X-Amzn-Errortype": "ServiceUnavailable:http://internal.amazon.com/"}, body: `{}`}}, "ServiceUnavailable", 3},
		{"not found", []answer{{status: 400, header: map[string]string{"X-Amzn-Requestid": "req-1"}, body: `{"__type":"ResourceNotFoundException","Message":"Secrets Manager can't find the specified secret."}`}}, "ResourceNotFoundException", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.reset(tc.answers...)
			_, sdkErr := sdk.GetSecretValue(context.Background(), &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")})
			sdkAttempts := len(srv.requests())
			srv.reset(tc.answers...)
			ourErr := ours.Call(context.Background(), "GetSecretValue", map[string]string{"SecretId": "s"}, nil)
			if n := len(srv.requests()); n != tc.attempts || sdkAttempts != tc.attempts {
				t.Errorf("%d attempts, the SDK's %d: want %d", n, sdkAttempts, tc.attempts)
			}
			if tc.code == "" {
				if ourErr != nil || sdkErr != nil {
					t.Fatalf("%v (the SDK's %v)", ourErr, sdkErr)
				}
				return
			}
			var ae smithy.APIError
			if !errors.As(ourErr, &ae) || ae.ErrorCode() != tc.code {
				t.Fatalf("%v: want the API error %s", ourErr, tc.code)
			}
			var oe *smithy.OperationError
			var re *smithyhttp.ResponseError
			if !errors.As(ourErr, &oe) || oe.Service() != "Secrets Manager" || oe.Operation() != "GetSecretValue" || !errors.As(ourErr, &re) {
				t.Errorf("%v: want an OperationError around a ResponseError", ourErr)
			}
			// The SDK's modeled errors (ResourceNotFoundException) are
			// types of their own, without "api error " in their text.
			if ourErr.Error() != sdkErr.Error() && strings.Replace(ourErr.Error(), "api error ", "", 1) != sdkErr.Error() {
				t.Errorf("error\n %s\nthe SDK's\n %s", ourErr, sdkErr)
			}
		})
	}
}

func noDelay(int, error) (time.Duration, error) { return 0, nil }

// A call that cannot be answered in time ends with the caller's context,
// as a canceled error, not after more attempts.
func TestCallEndsWithItsContext(t *testing.T) {
	srv := &server{answers: []answer{{status: 500, body: `{"__type":"InternalFailure"}`}}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := New(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), Credentials: testCreds, RetryMaxAttempts: 50}, EventBridge)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := c.Call(ctx, "PutEvents", map[string]any{}, nil)
	if err == nil || time.Since(began) > 5*time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v after %v: want the context's deadline", err, time.Since(began))
	}
	if n := len(srv.requests()); n >= 50 {
		t.Fatalf("%d attempts", n)
	}
}

// Endpoints are those of the SDK's endpoint rules for each service, in
// every partition, with and without FIPS and dual-stack.
func TestEndpointsAreTheSDKs(t *testing.T) {
	ctx := context.Background()
	regions := []string{"us-east-1", "eu-west-1", "ap-southeast-2", "il-central-1", "mx-central-1", "cn-north-1", "cn-northwest-1",
		"us-gov-west-1", "us-gov-east-1", "us-iso-east-1", "us-isob-east-1", "eu-isoe-west-1", "us-isof-south-1", "eusc-de-east-1", "xx-unknown-1"}
	sdk := map[string]func(region string, fips, dual bool) (string, error){
		EventBridge.ID: func(region string, fips, dual bool) (string, error) {
			ep, err := eventbridge.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, eventbridge.EndpointParameters{Region: &region, UseFIPS: &fips, UseDualStack: &dual})
			return ep.URI.String(), err
		},
		SecretsManager.ID: func(region string, fips, dual bool) (string, error) {
			ep, err := secretsmanager.NewDefaultEndpointResolverV2().ResolveEndpoint(ctx, secretsmanager.EndpointParameters{Region: &region, UseFIPS: &fips, UseDualStack: &dual})
			return ep.URI.String(), err
		},
	}
	for _, svc := range []Service{EventBridge, SecretsManager} {
		for _, region := range regions {
			for _, fips := range []bool{false, true} {
				for _, dual := range []bool{false, true} {
					want, err := sdk[svc.ID](region, fips, dual)
					if err != nil {
						t.Fatalf("%s %s fips=%v dual=%v: the SDK: %v", svc.ID, region, fips, dual, err)
					}
					if got := regionalEndpoint(svc, region, fips, dual); got != want {
						t.Errorf("%s %s fips=%v dual=%v: %s, the SDK's %s", svc.ID, region, fips, dual, got, want)
					}
				}
			}
		}
	}
}

// source is a configuration source as lambdafn's environment answers.
type source map[string]string

func (s source) GetServiceBaseEndpoint(_ context.Context, id string) (string, bool, error) {
	v, ok := s["AWS_ENDPOINT_URL_"+strings.ReplaceAll(strings.ToUpper(id), " ", "_")]
	return v, ok, nil
}

func (s source) GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error) {
	if s["AWS_USE_FIPS_ENDPOINT"] == "true" {
		return aws.FIPSEndpointStateEnabled, true, nil
	}
	return aws.FIPSEndpointStateUnset, false, nil
}

func (s source) GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error) {
	return aws.DualStackEndpointStateUnset, false, nil
}

// The endpoint a configuration gives: the service's override, then the
// configuration's, then the region's (FIPS when asked); no region, no
// endpoint, and every call says so.
func TestEndpointOfAConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  aws.Config
		want string
	}{
		{"region", aws.Config{Region: "eu-central-1"}, "https://events.eu-central-1.amazonaws.com"},
		{"FIPS", aws.Config{Region: "us-east-1", ConfigSources: []any{source{"AWS_USE_FIPS_ENDPOINT": "true"}}}, "https://events-fips.us-east-1.amazonaws.com"},
		{"AWS_ENDPOINT_URL", aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:9")}, "http://127.0.0.1:9"},
		{"AWS_ENDPOINT_URL_EVENTBRIDGE over AWS_ENDPOINT_URL", aws.Config{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:9"),
			ConfigSources: []any{source{"AWS_ENDPOINT_URL_EVENTBRIDGE": "http://127.0.0.1:10/bus"}}}, "http://127.0.0.1:10/bus"},
		{"another service's override", aws.Config{Region: "us-east-1", ConfigSources: []any{source{"AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:11"}}},
			"https://events.us-east-1.amazonaws.com"},
	} {
		got, err := resolveEndpoint(tc.cfg, EventBridge)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	err := New(aws.Config{}, EventBridge).Call(context.Background(), "PutEvents", map[string]any{}, nil)
	var oe *smithy.OperationError
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), "no AWS region") {
		t.Fatalf("without a region: %v", err)
	}
}

// recorder is a tracer provider that keeps the names of its ended spans
// and whether they failed.
type recorder struct {
	mu    sync.Mutex
	ended []string
}

func (r *recorder) Tracer(string, ...smithytracing.TracerOption) smithytracing.Tracer { return r }

func (r *recorder) StartSpan(ctx context.Context, name string, opts ...smithytracing.SpanOption) (context.Context, smithytracing.Span) {
	var o smithytracing.SpanOptions
	for _, f := range opts {
		f(&o)
	}
	return ctx, &span{r: r, name: name, kind: o.Kind, service: o.Properties.Get("rpc.service")}
}

type span struct {
	smithytracing.Span
	r       *recorder
	name    string
	kind    smithytracing.SpanKind
	service any
	failed  bool
	code    any
}

func (s *span) SetStatus(st smithytracing.SpanStatus) { s.failed = st == smithytracing.SpanStatusError }

func (s *span) SetProperty(k, v any) {
	if k == "api.error_code" {
		s.code = v
	}
}

func (s *span) End() {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	name := s.name
	if s.failed {
		name += fmt.Sprintf(" failed (%v)", s.code)
	}
	if s.kind != smithytracing.SpanKindClient || s.service == nil {
		name += " (not a client span of a service)"
	}
	s.r.ended = append(s.r.ended, name)
}

// With a tracer provider, each call is one client span named as the SDK
// names its calls' spans, marked failed with the service's error code
// when the call failed.
func TestCallsAreSpans(t *testing.T) {
	srv := &server{answers: []answer{{status: 200, body: `{}`}, {status: 400, body: `{"__type":"ValidationException"}`}}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	rec := &recorder{}
	c := New(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), Credentials: testCreds}, EventBridge,
		func(o *Options) { o.TracerProvider = rec })
	_ = c.Call(context.Background(), "PutEvents", map[string]any{}, nil)
	_ = c.Call(context.Background(), "PutEvents", map[string]any{}, nil)
	if want := []string{"EventBridge.PutEvents", "EventBridge.PutEvents failed (ValidationException)"}; !slices.Equal(rec.ended, want) {
		t.Fatalf("spans %v, want %v", rec.ended, want)
	}
}

// An answer cut short after its status is not a reason to send the
// request again: PutEvents twice would be two events. The SDK does not
// retry it either.
func TestAnAnswerCutShortIsNotSentAgain(t *testing.T) {
	var n int
	var mu sync.Mutex
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"FailedEntryCount":0,`)
	}))
	defer ts.Close()
	c := New(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), Credentials: testCreds}, EventBridge)
	err := c.Call(context.Background(), "PutEvents", map[string]any{}, &struct{}{})
	var de *smithy.DeserializationError
	if !errors.As(err, &de) || n != 1 {
		t.Fatalf("%d requests, %v: want one, and a deserialization error", n, err)
	}
}

// In Lambda, a request carries the invocation's trace header, as the
// SDK's recursion detection sends it (encoded); outside Lambda it does
// not.
func TestTraceHeaderInLambda(t *testing.T) {
	srv := &server{answers: []answer{{status: 200, body: `{}`}}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := New(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), Credentials: testCreds}, EventBridge)
	t.Setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:0|b")
	if err := c.Call(context.Background(), "PutEvents", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "worker")
	if err := c.Call(context.Background(), "PutEvents", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	got := srv.requests()
	if h := got[0].header.Get("X-Amzn-Trace-Id"); h != "" {
		t.Errorf("outside Lambda: trace header %q", h)
	}
	if h, want := got[1].header.Get("X-Amzn-Trace-Id"), "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1;Lineage=a87bd80c:0%7Cb"; h != want {
		t.Errorf("in Lambda: trace header %q, want %q", h, want)
	}
}

// A retry waits what the service's x-amz-retry-after asks, between the
// backoff and 5 s more, as the SDK waits.
func TestRetryAfterIsClamped(t *testing.T) {
	errWith := func(v string) error {
		resp := &http.Response{Header: http.Header{}}
		if v != "" {
			resp.Header.Set("X-Amz-Retry-After", v)
		}
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: errors.New("throttled")}
	}
	backoff := 100 * time.Millisecond
	for v, want := range map[string]time.Duration{
		"": backoff, "junk": backoff, "-5": backoff, "50": backoff, "1500": 1500 * time.Millisecond, "60000": backoff + 5*time.Second,
	} {
		if got := retryAfter(backoff, errWith(v)); got != want {
			t.Errorf("x-amz-retry-after %q: wait %v, want %v", v, got, want)
		}
	}
}

// ignoring is a source that sets AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
type ignoring struct{ source }

func (ignoring) GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error) {
	return true, true, nil
}

// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true ignores the service's own
// endpoint variable, as the SDK does.
func TestIgnoredEndpointOverrides(t *testing.T) {
	cfg := aws.Config{Region: "us-east-1", ConfigSources: []any{ignoring{source{"AWS_ENDPOINT_URL_EVENTBRIDGE": "http://127.0.0.1:9"}}}}
	if got, err := resolveEndpoint(cfg, EventBridge); err != nil || got != "https://events.us-east-1.amazonaws.com" {
		t.Fatalf("%q, %v", got, err)
	}
}

// Anonymous credentials, however given, send the request unsigned, as
// the SDK does.
func TestAnonymousCredentialsSignNothing(t *testing.T) {
	srv := &server{answers: []answer{{status: 200, body: `{}`}}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	for _, creds := range []aws.CredentialsProvider{aws.AnonymousCredentials{}, &aws.AnonymousCredentials{}} {
		c := New(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), Credentials: creds}, EventBridge)
		if err := c.Call(context.Background(), "PutEvents", map[string]any{}, nil); err != nil {
			t.Fatalf("%T: %v", creds, err)
		}
	}
	for _, r := range srv.requests() {
		if r.header.Get("Authorization") != "" {
			t.Fatalf("signed: %s", r.header.Get("Authorization"))
		}
	}
}
