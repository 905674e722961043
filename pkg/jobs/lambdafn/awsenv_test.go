package lambdafn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The functions' AWS configuration, read from the environment, resolves
// as the SDK's shared-config loader (config.LoadDefaultConfig) resolves the
// same environment: the region, the credentials (what a request is signed
// with: key, session token, scope), and each client's endpoint, retries
// and TLS roots, for Lambda's environment, the local stack's endpoint
// overrides and the other variables the loader reads from the environment.
// Each client is asked for a real request, which a recording HTTP client
// stops before it leaves.
func TestAWSConfigFromEnvResolvesAsTheSharedLoader(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "ca.pem")
	writeCert(t, bundle)
	creds := containerCredentials(t)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("token-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{"AWS_ACCESS_KEY_ID": "ASIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}
	with := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range keys {
			out[k] = v
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	cases := map[string]map[string]string{
		"Lambda": with(map[string]string{"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-1",
			"AWS_EXECUTION_ENV": "AWS_Lambda_provided.al2023", "AWS_LAMBDA_FUNCTION_NAME": "jobs-worker"}),
		"local stack": with(map[string]string{"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000",
			"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:4566", "AWS_ENDPOINT_URL_SCHEDULER": "http://127.0.0.1:5000",
			"AWS_ENDPOINT_URL_SECRETS_MANAGER": "http://127.0.0.1:5001"}),
		"one endpoint for all but one": with(map[string]string{"AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": "http://127.0.0.1:4566",
			"AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:9324"}),
		"configured endpoints ignored": with(map[string]string{"AWS_REGION": "us-east-1", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true",
			"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000"}),
		"default region, old key names, account": {"AWS_DEFAULT_REGION": "ap-south-1", "AWS_ACCESS_KEY": "AKIAOLD", "AWS_SECRET_KEY": "old",
			"AWS_ACCOUNT_ID": "123456789012"},
		"retries, FIPS, dual-stack": with(map[string]string{"AWS_REGION": "us-west-2", "AWS_MAX_ATTEMPTS": "5", "AWS_RETRY_MODE": "adaptive",
			"AWS_USE_FIPS_ENDPOINT": "true", "AWS_USE_DUALSTACK_ENDPOINT": "true"}),
		"CA bundle":      with(map[string]string{"AWS_REGION": "us-east-1", "AWS_CA_BUNDLE": bundle}),
		"no credentials": {"AWS_REGION": "us-east-1"},
		// Lambda's environment without keys: a container credentials
		// endpoint, its token in a file.
		"container credentials endpoint": {"AWS_REGION": "us-east-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": creds.URL + "/creds",
			"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile},
		"container credentials endpoint, token in the variable": {"AWS_REGION": "us-east-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": creds.URL + "/creds",
			"AWS_CONTAINER_AUTHORIZATION_TOKEN": "token-1"},
		"keys before the container endpoint": with(map[string]string{"AWS_REGION": "us-east-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": creds.URL + "/creds"}),
	}
	for name, env := range cases {
		t.Run(name, func(t *testing.T) {
			isolate(t, dir)
			for k, v := range env {
				t.Setenv(k, v)
			}
			ctx := context.Background()
			want, err := config.LoadDefaultConfig(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got, err := awsConfigFromEnv(os.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			if got.Region != want.Region {
				t.Errorf("region: got %q, want %q", got.Region, want.Region)
			}
			gc, gerr := got.Credentials.Retrieve(ctx)
			wc, werr := want.Credentials.Retrieve(ctx)
			if (gerr == nil) != (werr == nil) || gc.AccessKeyID != wc.AccessKeyID || gc.SecretAccessKey != wc.SecretAccessKey ||
				gc.SessionToken != wc.SessionToken || gc.AccountID != wc.AccountID || gc.Source != wc.Source {
				t.Errorf("credentials: got %+v (%v), want %+v (%v)", gc, gerr, wc, werr)
			}
			if _, container := env["AWS_CONTAINER_CREDENTIALS_FULL_URI"]; container && gerr != nil {
				t.Errorf("container credentials: %v", gerr)
			}
			if gerr != nil && !errors.Is(gerr, errNoEnvCredentials) {
				t.Errorf("credentials: got %v, want the error naming the variables", gerr)
			}
			for _, c := range clientsOf(got, want) {
				if !c.got.options.equal(c.want.options) {
					t.Errorf("%s options: got %+v, want %+v", c.service, c.got.options, c.want.options)
				}
				g, w := c.got.request(t), c.want.request(t)
				if werr == nil && (w.URL == "" || w.Credential == "") {
					t.Fatalf("%s: the loader's client made no signed request: %+v", c.service, w)
				}
				if g != w {
					t.Errorf("%s request: got %+v, want %+v", c.service, g, w)
				}
			}
		})
	}
}

// credentialsServer is a container credentials endpoint: a request with
// the current token gets credentials named after it, expiring in a minute;
// any other token gets a 401.
type credentialsServer struct {
	*httptest.Server
	mu       sync.Mutex
	token    string
	requests int
}

func containerCredentials(t *testing.T) *credentialsServer {
	t.Helper()
	s := &credentialsServer{token: "token-1"}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.Header.Get("Authorization") != s.token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"Unauthorized","message":"wrong token"}`))
			return
		}
		s.requests++
		_ = json.NewEncoder(w).Encode(map[string]string{"AccessKeyId": "ASIA" + strings.ToUpper(s.token), "SecretAccessKey": "secret",
			"Token": "session", "Expiration": time.Now().Add(time.Minute).UTC().Format(time.RFC3339), "AccountId": "123456789012"})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *credentialsServer) setToken(token string) {
	s.mu.Lock()
	s.token = token
	s.mu.Unlock()
}

// Credentials from a container credentials endpoint are refreshed before
// they expire, as the shared loader's are (within 5 minutes of their
// expiry: these expire in one), each refresh with the token the token file
// holds then: a long-lived execution environment never signs with expired
// credentials, and a rotated token is used.
func TestContainerCredentialsAreRefreshed(t *testing.T) {
	creds := containerCredentials(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("token-1"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := mapEnv(map[string]string{"AWS_REGION": "us-east-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": creds.URL + "/creds",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": tokenFile})
	cfg, err := awsConfigFromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := cfg.Credentials.Retrieve(ctx)
	if err != nil || first.AccessKeyID != "ASIATOKEN-1" || !first.CanExpire {
		t.Fatalf("first credentials %+v, %v", first, err)
	}
	creds.setToken("token-2")
	if err := os.WriteFile(tokenFile, []byte("token-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	second, err := cfg.Credentials.Retrieve(ctx)
	if err != nil || second.AccessKeyID != "ASIATOKEN-2" || creds.requests != 2 {
		t.Fatalf("credentials within their expiry window: %+v, %v; want new ones, fetched with the new token", second, err)
	}
}

// Plain http to a host other than this machine or ECS's and EKS's
// credentials addresses is refused, as the shared loader refuses it; so is
// a region that is not a host label (every client would put it in its
// endpoint's host): the function does not start.
func TestAWSConfigRefusesUnsafeEndpointsAndBadRegions(t *testing.T) {
	t.Parallel()
	for name, vars := range map[string]map[string]string{
		"credentials over http to another host": {"AWS_REGION": "us-east-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://192.0.2.1/creds"},
		"region with a path":                    {"AWS_REGION": "us-east-1.example.com/x", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"},
		"region with a dot":                     {"AWS_DEFAULT_REGION": "evil.example", "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"},
	} {
		if _, err := awsConfigFromEnv(mapEnv(vars)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:9/creds", "http://169.254.170.23/v1/credentials", "http://[fd00:ec2::23]/creds", "https://192.0.2.1/creds"} {
		if _, err := awsConfigFromEnv(mapEnv(map[string]string{"AWS_REGION": "us-east-1", "AWS_CONTAINER_CREDENTIALS_FULL_URI": ok})); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// isolate empties the process's AWS_ variables and points the shared files
// and the home at dir, where there are none.
func isolate(t *testing.T, dir string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, "")
			os.Unsetenv(k) // restored by t.Setenv's cleanup
		}
	}
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true") // the loader would ask the instance metadata for credentials
}

// resolved is what a client resolved from a configuration.
type resolved struct {
	options clientOptions
	call    func() // makes one request through doer
	doer    *recorder
}

type clientOptions struct {
	Region, BaseEndpoint string
	FIPS                 aws.FIPSEndpointState
	DualStack            aws.DualStackEndpointState
	RetryMaxAttempts     int
	RetryMode            aws.RetryMode
	Roots                *x509.CertPool
}

func (a clientOptions) equal(b clientOptions) bool {
	rootsEqual := (a.Roots == nil) == (b.Roots == nil) && (a.Roots == nil || a.Roots.Equal(b.Roots))
	a.Roots, b.Roots = nil, nil
	return a == b && rootsEqual
}

// request is what the recorder saw of the client's request: where it went
// and what it was signed with.
type request struct{ URL, Credential, Token string }

var credentialScope = regexp.MustCompile(`Credential=([^,]+)`)

func (r resolved) request(t *testing.T) request {
	t.Helper()
	r.call()
	if r.doer.req == nil {
		return request{}
	}
	cred := credentialScope.FindStringSubmatch(r.doer.req.Header.Get("Authorization"))
	out := request{URL: r.doer.req.URL.Scheme + "://" + r.doer.req.URL.Host, Token: r.doer.req.Header.Get("X-Amz-Security-Token")}
	if cred != nil {
		// Key/date/region/service/aws4_request: drop the date.
		parts := strings.Split(cred[1], "/")
		if len(parts) == 5 {
			parts[1] = "date"
		}
		out.Credential = strings.Join(parts, "/")
	}
	return out
}

// recorder keeps a request and answers it with an error.
type recorder struct{ req *http.Request }

var errRecorded = errors.New("recorded")

func (r *recorder) Do(req *http.Request) (*http.Response, error) {
	r.req = req
	return nil, errRecorded
}

type clientPair struct {
	service   string
	got, want resolved
}

// clientsOf builds the four clients the functions use from both
// configurations.
func clientsOf(got, want aws.Config) []clientPair {
	ctx := context.Background()
	var out []clientPair
	pair := func(service string, build func(aws.Config) resolved) {
		out = append(out, clientPair{service, build(got), build(want)})
	}
	roots := func(c aws.HTTPClient) *x509.CertPool {
		if b, ok := c.(*awshttp.BuildableClient); ok {
			if tr := b.GetTransport(); tr.TLSClientConfig != nil {
				return tr.TLSClientConfig.RootCAs
			}
		}
		return nil
	}
	pair("DynamoDB", func(cfg aws.Config) resolved {
		c := dynamodb.NewFromConfig(cfg)
		o := c.Options()
		rec := &recorder{}
		return resolved{options: clientOptions{o.Region, aws.ToString(o.BaseEndpoint), o.EndpointOptions.UseFIPSEndpoint, o.EndpointOptions.UseDualStackEndpoint, o.RetryMaxAttempts, o.RetryMode, roots(o.HTTPClient)},
			doer: rec, call: func() {
				_, _ = c.ListTables(ctx, &dynamodb.ListTablesInput{}, func(o *dynamodb.Options) { o.HTTPClient, o.Retryer = rec, aws.NopRetryer{} })
			}}
	})
	pair("SQS", func(cfg aws.Config) resolved {
		c := sqs.NewFromConfig(cfg)
		o := c.Options()
		rec := &recorder{}
		return resolved{options: clientOptions{o.Region, aws.ToString(o.BaseEndpoint), o.EndpointOptions.UseFIPSEndpoint, o.EndpointOptions.UseDualStackEndpoint, o.RetryMaxAttempts, o.RetryMode, roots(o.HTTPClient)},
			doer: rec, call: func() {
				_, _ = c.ListQueues(ctx, &sqs.ListQueuesInput{}, func(o *sqs.Options) { o.HTTPClient, o.Retryer = rec, aws.NopRetryer{} })
			}}
	})
	pair("Scheduler", func(cfg aws.Config) resolved {
		c := scheduler.NewFromConfig(cfg)
		o := c.Options()
		rec := &recorder{}
		return resolved{options: clientOptions{o.Region, aws.ToString(o.BaseEndpoint), o.EndpointOptions.UseFIPSEndpoint, o.EndpointOptions.UseDualStackEndpoint, o.RetryMaxAttempts, o.RetryMode, roots(o.HTTPClient)},
			doer: rec, call: func() {
				_, _ = c.ListSchedules(ctx, &scheduler.ListSchedulesInput{}, func(o *scheduler.Options) { o.HTTPClient, o.Retryer = rec, aws.NopRetryer{} })
			}}
	})
	pair("EventBridge", func(cfg aws.Config) resolved {
		c := eventbridge.NewFromConfig(cfg)
		o := c.Options()
		rec := &recorder{}
		return resolved{options: clientOptions{o.Region, aws.ToString(o.BaseEndpoint), o.EndpointOptions.UseFIPSEndpoint, o.EndpointOptions.UseDualStackEndpoint, o.RetryMaxAttempts, o.RetryMode, roots(o.HTTPClient)},
			doer: rec, call: func() {
				_, _ = c.ListEventBuses(ctx, &eventbridge.ListEventBusesInput{}, func(o *eventbridge.Options) { o.HTTPClient, o.Retryer = rec, aws.NopRetryer{} })
			}}
	})
	pair("Secrets Manager", func(cfg aws.Config) resolved {
		c := secretsmanager.NewFromConfig(cfg)
		o := c.Options()
		rec := &recorder{}
		return resolved{options: clientOptions{o.Region, aws.ToString(o.BaseEndpoint), o.EndpointOptions.UseFIPSEndpoint, o.EndpointOptions.UseDualStackEndpoint, o.RetryMaxAttempts, o.RetryMode, roots(o.HTTPClient)},
			doer: rec, call: func() {
				_, _ = c.ListSecrets(ctx, &secretsmanager.ListSecretsInput{}, func(o *secretsmanager.Options) { o.HTTPClient, o.Retryer = rec, aws.NopRetryer{} })
			}}
	})
	return out
}

func writeCert(t *testing.T, path string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lambdajobs test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
