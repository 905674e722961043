// Package awsjson calls an operation of an AWS service that speaks the
// JSON 1.1 protocol, with the SDK's own parts: an aws.Config's region,
// credentials, HTTP client and retry settings, the SDK's SigV4 signer and
// its standard retryer, and the SDK's error types.
//
// It exists for the functions' two single-operation services, EventBridge
// (PutEvents) and Secrets Manager (GetSecretValue). Their SDK clients link
// each service's whole schema package, which the process builds when it
// starts whether or not the function ever calls the service: package
// initialisation and bootstrap size that every function paid
// (docs/BENCHMARKS.md, section 4, measures them). TestRequestsAreTheSDKs holds each
// request equal to the SDK client's (method, path, headers, signature and
// body) and TestEndpointsAreTheSDKs the endpoints equal to the SDK's rules
// in every partition.
//
// What the SDK client does and this does not: clock-skew correction of a
// retried signature, endpoint discovery, response checksums (neither
// service sends one), the configuration's APIOptions, interceptors,
// ServiceOptions and endpoint resolvers (parts of the SDK's clients, which
// this has not), error types of their own for the errors the SDK models
// (here each is a smithy.GenericAPIError with the same code and message),
// and the SDK's own metrics. Its requests' User-Agent is UserAgent, which
// CloudTrail records. A call
// retries as the SDK's client does: the configuration's Retryer when it has
// one, else the standard retryer (adaptive with AWS_RETRY_MODE=adaptive),
// with RetryMaxAttempts when set.
package awsjson

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithytracing "github.com/aws/smithy-go/tracing"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Service names one AWS service of the JSON 1.1 protocol.
type Service struct {
	// ID is the SDK's service id ("EventBridge", "Secrets Manager"): errors
	// name it, and AWS_ENDPOINT_URL_<ID> (upper case, spaces as
	// underscores) overrides the endpoint.
	ID string
	// SigningName is SigV4's service name ("events", "secretsmanager").
	SigningName string
	// EndpointPrefix is the endpoint host's first label ("events",
	// "secretsmanager").
	EndpointPrefix string
	// TargetPrefix is X-Amz-Target's ("AWSEvents", "secretsmanager").
	TargetPrefix string
}

// The services the functions call through this package.
var (
	EventBridge    = Service{ID: "EventBridge", SigningName: "events", EndpointPrefix: "events", TargetPrefix: "AWSEvents"}
	SecretsManager = Service{ID: "Secrets Manager", SigningName: "secretsmanager", EndpointPrefix: "secretsmanager", TargetPrefix: "secretsmanager"}
)

// UserAgent is the requests' User-Agent header.
const UserAgent = "lambdajobs-awsjson aws-sdk-go-v2-signer"

// Client calls one service's operations.
type Client struct {
	svc      Service
	cfg      aws.Config
	endpoint string // the URL every request goes to
	epErr    error
	retryer  aws.RetryerV2
	signer   *v4.Signer
	tracer   smithytracing.Tracer
	now      func() time.Time
}

// Options adjusts a Client.
type Options struct {
	// TracerProvider, when set, opens a span per call, named
	// "<Service ID>.<operation>" as the SDK names its calls' spans.
	TracerProvider smithytracing.TracerProvider
}

// New returns a client of svc with cfg's region, credentials, endpoint
// overrides, HTTP client and retry settings. An endpoint that cannot be
// resolved (no region) is every call's error.
func New(cfg aws.Config, svc Service, optFns ...func(*Options)) *Client {
	var o Options
	for _, f := range optFns {
		f(&o)
	}
	c := &Client{svc: svc, cfg: cfg, retryer: retryerOf(cfg), signer: v4.NewSigner(), now: time.Now}
	if ep, err := resolveEndpoint(cfg, svc); err != nil {
		c.epErr = err
	} else if u, err := url.Parse(ep); err != nil {
		c.epErr = fmt.Errorf("endpoint %q: %w", ep, err)
	} else {
		// The operation's path, "/", joined to the endpoint's as the SDK
		// joins them.
		u.Path = smithyhttp.JoinPath(u.Path, "/")
		c.endpoint = u.String()
	}
	if c.cfg.HTTPClient == nil {
		c.cfg.HTTPClient = awshttp.NewBuildableClient()
	}
	if o.TracerProvider != nil {
		c.tracer = o.TracerProvider.Tracer("github.com/lambdajobs/lambdajobs/internal/awsjson")
	}
	return c
}

// retryerOf is the retryer the SDK's clients resolve from cfg.
func retryerOf(cfg aws.Config) aws.RetryerV2 {
	var r aws.Retryer
	if cfg.Retryer != nil {
		r = cfg.Retryer()
	} else {
		var std []func(*retry.StandardOptions)
		if n := cfg.RetryMaxAttempts; n != 0 {
			std = append(std, func(o *retry.StandardOptions) { o.MaxAttempts = n })
		}
		if cfg.RetryMode == aws.RetryModeAdaptive {
			r = retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) { o.StandardOptions = append(o.StandardOptions, std...) })
		} else {
			r = retry.NewStandard(std...)
		}
	}
	if n := cfg.RetryMaxAttempts; n != 0 && cfg.Retryer != nil {
		r = retry.AddWithMaxAttempts(r, n)
	}
	if v2, ok := r.(aws.RetryerV2); ok {
		return v2
	}
	return retryerV2{r}
}

// retryerV2 is a Retryer without GetAttemptToken, as the SDK wraps one.
type retryerV2 struct{ aws.Retryer }

func (r retryerV2) GetAttemptToken(context.Context) (func(error) error, error) {
	return r.GetInitialToken(), nil
}

// Call sends operation op with in (JSON) and decodes the answer into out
// (a pointer, or nil to discard it). Its errors are the SDK's: a
// *smithy.OperationError wrapping an *awshttp.ResponseError whose error is
// the service's smithy.APIError, a *smithyhttp.RequestSendError for a
// request that got no answer, or a *retry.MaxAttemptsError around the last
// attempt's.
func (c *Client) Call(ctx context.Context, op string, in, out any) (err error) {
	if c.tracer != nil {
		var span smithytracing.Span
		ctx, span = c.tracer.StartSpan(ctx, c.svc.ID+"."+op, func(o *smithytracing.SpanOptions) {
			o.Kind = smithytracing.SpanKindClient
			o.Properties.Set("rpc.system", "aws-api")
			o.Properties.Set("rpc.service", c.svc.ID)
			o.Properties.Set("rpc.method", op)
		})
		defer func() {
			// The SDK's properties of a call's span.
			if err != nil {
				span.SetProperty("exception.type", fmt.Sprintf("%T", err))
				span.SetProperty("exception.message", err.Error())
				var ae smithy.APIError
				if errors.As(err, &ae) {
					span.SetProperty("api.error_code", ae.ErrorCode())
					span.SetProperty("api.error_message", ae.ErrorMessage())
					span.SetProperty("api.error_fault", ae.ErrorFault().String())
				}
			}
			span.SetProperty("error", err != nil)
			if err == nil {
				span.SetStatus(smithytracing.SpanStatusOK)
			} else {
				span.SetStatus(smithytracing.SpanStatusError)
			}
			span.End()
		}()
	}
	defer func() {
		if err != nil {
			err = &smithy.OperationError{ServiceID: c.svc.ID, OperationName: op, Err: err}
		}
	}()
	if c.epErr != nil {
		return c.epErr
	}
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("serialize: %w", err)
	}
	releaseRetry := func(error) error { return nil }
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return &smithy.CanceledError{Err: err}
		}
		releaseAttempt, err := c.retryer.GetAttemptToken(ctx)
		if err != nil {
			return fmt.Errorf("failed to get retry Send token, %w", err)
		}
		answer, err := c.attempt(ctx, op, body)
		_ = releaseRetry(err)
		_ = releaseAttempt(err)
		if err == nil {
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(answer, out); err != nil {
				return fmt.Errorf("deserialize: %w", err)
			}
			return nil
		}
		if ctx.Err() != nil {
			return &smithy.CanceledError{Err: err}
		}
		if !c.retryer.IsErrorRetryable(err) {
			return err
		}
		if n := c.retryer.MaxAttempts(); n > 0 && attempt >= n {
			return &retry.MaxAttemptsError{Attempt: attempt, Err: err}
		}
		var tokenErr error
		if releaseRetry, tokenErr = c.retryer.GetRetryToken(ctx, err); tokenErr != nil {
			return errors.Join(err, tokenErr)
		}
		delay, derr := c.retryer.RetryDelay(attempt, err)
		if derr != nil {
			return derr
		}
		delay = retryAfter(delay, err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return &aws.RequestCanceledError{Err: ctx.Err()}
		case <-t.C:
		}
	}
}

// attempt sends the request once and returns the answer's body, or the
// error that ended it.
func (c *Client) attempt(ctx context.Context, op string, body []byte) ([]byte, error) {
	req, err := c.request(ctx, op, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, &smithyhttp.RequestSendError{Err: err}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		// An answer cut short: the request was received, so it is not
		// sent again (a PutEvents twice is two events), unless the SDK
		// would (a timeout, a reset connection).
		return nil, &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: &smithy.DeserializationError{Err: err}},
			RequestID:     requestID(resp),
		}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return answer, nil
	}
	return nil, &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: apiError(resp, answer)},
		RequestID:     requestID(resp),
	}
}

// requestID is the answer's request id, as the SDK reads it.
func requestID(resp *http.Response) string {
	if id := resp.Header.Get("X-Amzn-Requestid"); id != "" {
		return id
	}
	return resp.Header.Get("X-Amz-Request-Id")
}

// retryAfter is the SDK's wait before a retry of a throttled call: the
// service's x-amz-retry-after (milliseconds), clamped to the backoff and
// 5 s more.
func retryAfter(backoff time.Duration, err error) time.Duration {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) || re.Response == nil || re.Response.Response == nil {
		return backoff
	}
	ms, perr := strconv.ParseInt(re.Response.Header.Get("X-Amz-Retry-After"), 10, 64)
	if perr != nil || ms < 0 {
		return backoff
	}
	return min(max(time.Duration(ms)*time.Millisecond, backoff), backoff+5*time.Second)
}

// request builds the signed request.
func (c *Client) request(ctx context.Context, op string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", c.svc.TargetPrefix+"."+op)
	req.Header.Set("User-Agent", UserAgent)
	// The SDK's recursion detection: in Lambda, the invocation's trace
	// header (which the runtime sets in _X_AMZN_TRACE_ID) goes with the
	// request, so EventBridge passes the trace on to an event's targets.
	if _, inLambda := os.LookupEnv("AWS_LAMBDA_FUNCTION_NAME"); inLambda && req.Header.Get("X-Amzn-Trace-Id") == "" {
		if id, ok := os.LookupEnv("_X_AMZN_TRACE_ID"); ok {
			req.Header.Set("X-Amzn-Trace-Id", percentEncode(id))
		}
	}
	if c.cfg.Credentials == nil || aws.IsCredentialsProvider(c.cfg.Credentials, (*aws.AnonymousCredentials)(nil)) {
		return req, nil
	}
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to retrieve credentials: %w", err)
	}
	if err := c.signer.SignHTTP(ctx, creds, req, hexSHA256(body), c.svc.SigningName, c.cfg.Region, c.now().UTC()); err != nil {
		return nil, fmt.Errorf("failed to sign request: %w", err)
	}
	return req, nil
}

// percentEncode is the SDK's encoding of a trace header: bytes other than
// letters, digits and -=;:+&[]{}"', as %XX.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-=;:+&[]{}\"',", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// hexSHA256 is SigV4's payload hash.
func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// apiError is the service's error of a JSON 1.1 answer, as the SDK reads
// it: its code from the X-Amzn-ErrorType header or the body's __type (or
// code), without the namespace before a '#' or the detail after a ':', and
// its message (UnknownError for either when there is none). Unlike the
// SDK's, it is a smithy.GenericAPIError for every code, including those
// the SDK models as types of their own (ResourceNotFoundException): the
// same ErrorCode and ErrorMessage, and "api error" in its text.
func apiError(resp *http.Response, body []byte) *smithy.GenericAPIError {
	var doc struct {
		Type    string `json:"__type"`
		Code    string `json:"code"`
		Message string `json:"message"`
		Msg     string `json:"Message"`
	}
	_ = json.Unmarshal(body, &doc)
	code := resp.Header.Get("X-Amzn-Errortype")
	if code == "" {
		code = doc.Type
	}
	if code == "" {
		code = doc.Code
	}
	if i := strings.IndexByte(code, ':'); i >= 0 {
		code = code[:i]
	}
	if i := strings.LastIndexByte(code, '#'); i >= 0 {
		code = code[i+1:]
	}
	msg := doc.Message
	if msg == "" {
		msg = doc.Msg
	}
	if code == "" {
		code = "UnknownError"
	}
	if msg == "" {
		msg = "UnknownError"
	}
	fault := smithy.FaultClient
	if resp.StatusCode >= 500 {
		fault = smithy.FaultServer
	}
	return &smithy.GenericAPIError{Code: code, Message: msg, Fault: fault}
}
