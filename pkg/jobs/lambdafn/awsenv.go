package lambdafn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The functions' AWS configuration comes from the environment Lambda gives
// them, with the SDK's own credential providers, rather than from the SDK's
// shared-config loader (config.LoadDefaultConfig). In Lambda the two are the
// same: the region is AWS_REGION, the credentials are the execution role's,
// in AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or
// served by a container credentials endpoint (AWS_CONTAINER_CREDENTIALS_
// FULL_URI with AWS_CONTAINER_AUTHORIZATION_TOKEN[_FILE], as an environment
// without keys in its variables gets them), and there is no shared config
// or credentials file; the construct lets no team set an AWS_ variable of
// its own. The local stack sets the same variables and
// AWS_ENDPOINT_URL_DYNAMODB, _SQS, _SCHEDULER and _EVENTBRIDGE. The loader
// does the same with them (TestAWSConfigFromEnvResolvesAsTheSharedLoader
// holds the two equal) but it links the SDK's SSO, SSO OIDC, STS and
// sign-in clients and the instance metadata client for the credential
// sources Lambda never uses, clients of calls no role makes, whose package
// initialisation and size every cold start would pay for
// (TestFunctionsLinkNoSharedConfigLoader).
//
// Read, as the loader reads them: AWS_REGION (else AWS_DEFAULT_REGION),
// which must be a host label, as every client's endpoint rules require;
// AWS_ACCESS_KEY_ID (or AWS_ACCESS_KEY), AWS_SECRET_ACCESS_KEY (or
// AWS_SECRET_KEY), AWS_SESSION_TOKEN, AWS_ACCOUNT_ID; else
// AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or AWS_CONTAINER_CREDENTIALS_FULL_URI
// (over http only to a loopback, ECS or EKS address) with
// AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read at each refresh) or
// AWS_CONTAINER_AUTHORIZATION_TOKEN: the SDK's endpointcreds provider,
// refreshed by the SDK's credentials cache 5 minutes before they expire;
// AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>,
// AWS_IGNORE_CONFIGURED_ENDPOINT_URLS; AWS_CA_BUNDLE; AWS_MAX_ATTEMPTS,
// AWS_RETRY_MODE; AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT. Not
// read: the shared config and credentials files and the profile
// (AWS_PROFILE), and the credential sources Lambda does not use (web
// identity, SSO, instance metadata). A process with neither gets an error
// naming them at its first AWS call; a program outside Lambda that takes
// its credentials from those sources uses NewServiceWithConfig.

// envCredentialsSource is the credentials' Source, as the shared loader
// names credentials from the environment.
const envCredentialsSource = "EnvConfigCredentials"

// errNoEnvCredentials is what an AWS call answers when the environment
// holds no credentials.
var errNoEnvCredentials = errors.New("lambdafn: no AWS credentials in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a container credentials endpoint: " +
	"Lambda sets one or the other); a program that takes them from a profile, SSO or instance metadata loads its own configuration and calls lambdafn.NewServiceWithConfig")

// awsConfigFromEnv returns the AWS configuration the environment describes
// (see above).
func awsConfigFromEnv(getenv func(string) string) (aws.Config, error) {
	src := envSource{getenv: getenv}
	cfg := aws.Config{
		Logger:             logging.NewStandardLogger(os.Stderr),
		ConfigSources:      []any{src},
		Region:             firstSet(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION")),
		RuntimeEnvironment: aws.RuntimeEnvironment{EnvironmentIdentifier: aws.ExecutionEnvironmentID(getenv("AWS_EXECUTION_ENV"))},
	}
	var errs []error
	if cfg.Region != "" && !smithyhttp.ValidHostLabel(cfg.Region) {
		errs = append(errs, fmt.Errorf("invalid region %q: want a host label, such as us-east-1", cfg.Region))
	}
	creds, err := credentialsFromEnv(getenv)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.Credentials = creds
	if v := getenv("AWS_ENDPOINT_URL"); v != "" && !src.ignoreEndpoints() {
		cfg.BaseEndpoint = aws.String(v)
	}
	if v := getenv("AWS_MAX_ATTEMPTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("invalid value AWS_MAX_ATTEMPTS=%s, %w", v, err))
		}
		cfg.RetryMaxAttempts = n
	}
	if v := getenv("AWS_RETRY_MODE"); v != "" {
		mode, err := aws.ParseRetryMode(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("invalid AWS_RETRY_MODE value, %w", err))
		}
		cfg.RetryMode = mode
	}
	if _, _, err := src.GetUseFIPSEndpoint(context.Background()); err != nil {
		errs = append(errs, err)
	}
	if _, _, err := src.GetUseDualStackEndpoint(context.Background()); err != nil {
		errs = append(errs, err)
	}
	if path := getenv("AWS_CA_BUNDLE"); path != "" {
		client, err := withCABundle(path)
		if err != nil {
			errs = append(errs, err)
		}
		cfg.HTTPClient = client
	}
	if err := errors.Join(errs...); err != nil {
		return aws.Config{}, fmt.Errorf("AWS configuration: %w", err)
	}
	return cfg, nil
}

// credentialsFromEnv is the environment's credentials: its keys, else its
// container credentials endpoint, as the shared loader resolves them (see
// above); else a provider whose every answer is errNoEnvCredentials.
func credentialsFromEnv(getenv func(string) string) (aws.CredentialsProvider, error) {
	keys := aws.Credentials{
		AccessKeyID:     firstSet(getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_ACCESS_KEY")),
		SecretAccessKey: firstSet(getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SECRET_KEY")),
		SessionToken:    getenv("AWS_SESSION_TOKEN"),
		AccountID:       getenv("AWS_ACCOUNT_ID"),
		Source:          envCredentialsSource,
	}
	if keys.HasKeys() {
		return aws.NewCredentialsCache(credentials.StaticCredentialsProvider{Value: keys}), nil
	}
	var endpoint string
	if rel := getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"); rel != "" {
		endpoint = ecsContainerEndpoint + rel
	} else if full := getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI"); full != "" {
		if err := checkContainerEndpoint(full); err != nil {
			return nil, fmt.Errorf("AWS_CONTAINER_CREDENTIALS_FULL_URI: %w", err)
		}
		endpoint = full
	} else {
		return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return aws.Credentials{}, errNoEnvCredentials }), nil
	}
	token, tokenFile := getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"), getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
	provider := endpointcreds.New(endpoint, func(o *endpointcreds.Options) {
		o.AuthorizationToken = token
		if tokenFile != "" {
			o.AuthorizationTokenProvider = endpointcreds.TokenProviderFunc(func() (string, error) {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return "", fmt.Errorf("failed to read authorization token from %v: %v", tokenFile, err)
				}
				return string(b), nil
			})
		}
		o.CredentialSources = []aws.CredentialSource{aws.CredentialSourceHTTP}
	})
	return aws.NewCredentialsCache(provider, func(o *aws.CredentialsCacheOptions) { o.ExpiryWindow = 5 * time.Minute }), nil
}

// ecsContainerEndpoint is where AWS_CONTAINER_CREDENTIALS_RELATIVE_URI's
// path is served.
const ecsContainerEndpoint = "http://169.254.170.2"

// checkContainerEndpoint refuses, as the shared loader does, a credentials
// endpoint over plain http to a host that is not this machine or the
// container credentials address of ECS or EKS: credentials must not cross
// a network in the clear.
func checkContainerEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return fmt.Errorf("invalid URL, %w", err)
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("unable to parse host from local HTTP cred provider URL")
	}
	if u.Scheme != "http" {
		return nil
	}
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		if addrs, err = net.LookupHost(host); err != nil {
			return fmt.Errorf("failed to resolve host %q, %v", host, err)
		}
	}
	for _, a := range addrs {
		ip := net.ParseIP(a)
		if ip == nil || !(ip.IsLoopback() || ip.Equal(net.IPv4(169, 254, 170, 2)) || ip.Equal(net.IPv4(169, 254, 170, 23)) || ip.Equal(net.ParseIP("fd00:ec2::23"))) {
			return fmt.Errorf("invalid endpoint host, %q, only loopback/ecs/eks hosts are allowed", host)
		}
	}
	return nil
}

// withCABundle is the SDK's HTTP client trusting the certificates of the
// PEM file at path instead of the system's, as the loader builds it.
func withCABundle(path string) (*awshttp.BuildableClient, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("AWS_CA_BUNDLE: %w", err)
	}
	var appendErr error
	client := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{}
		}
		if tr.TLSClientConfig.RootCAs == nil {
			tr.TLSClientConfig.RootCAs = x509.NewCertPool()
		}
		if !tr.TLSClientConfig.RootCAs.AppendCertsFromPEM(pem) {
			appendErr = fmt.Errorf("AWS_CA_BUNDLE %s: no PEM certificate", path)
		}
	})
	return client, appendErr
}

// envSource answers the clients' questions about the environment when they
// are built (NewFromConfig looks for these methods in ConfigSources, as it
// does on the loader's EnvConfig).
type envSource struct{ getenv func(string) string }

// GetServiceBaseEndpoint is AWS_ENDPOINT_URL_<SERVICE>: the SDK id upper
// case, spaces as underscores (DYNAMODB, SQS, SCHEDULER, SECRETS_MANAGER).
func (s envSource) GetServiceBaseEndpoint(_ context.Context, sdkID string) (string, bool, error) {
	v := s.getenv("AWS_ENDPOINT_URL_" + strings.ReplaceAll(strings.ToUpper(sdkID), " ", "_"))
	return v, v != "", nil
}

// GetIgnoreConfiguredEndpoints is AWS_IGNORE_CONFIGURED_ENDPOINT_URLS.
func (s envSource) GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error) {
	v := s.getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
	switch {
	case v == "":
		return false, false, nil
	case strings.EqualFold(v, "true"):
		return true, true, nil
	case strings.EqualFold(v, "false"):
		return false, true, nil
	}
	return false, false, fmt.Errorf("invalid value for environment variable, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=%s, need true or false", v)
}

func (s envSource) ignoreEndpoints() bool {
	v, _, _ := s.GetIgnoreConfiguredEndpoints(context.Background())
	return v
}

// GetUseFIPSEndpoint is AWS_USE_FIPS_ENDPOINT.
func (s envSource) GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error) {
	on, found, err := s.flag("AWS_USE_FIPS_ENDPOINT")
	switch {
	case !found || err != nil:
		return aws.FIPSEndpointStateUnset, false, err
	case on:
		return aws.FIPSEndpointStateEnabled, true, nil
	}
	return aws.FIPSEndpointStateDisabled, true, nil
}

// GetUseDualStackEndpoint is AWS_USE_DUALSTACK_ENDPOINT.
func (s envSource) GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error) {
	on, found, err := s.flag("AWS_USE_DUALSTACK_ENDPOINT")
	switch {
	case !found || err != nil:
		return aws.DualStackEndpointStateUnset, false, err
	case on:
		return aws.DualStackEndpointStateEnabled, true, nil
	}
	return aws.DualStackEndpointStateDisabled, true, nil
}

func (s envSource) flag(name string) (on, found bool, err error) {
	switch v := s.getenv(name); {
	case v == "":
		return false, false, nil
	case strings.EqualFold(v, "true"):
		return true, true, nil
	case strings.EqualFold(v, "false"):
		return false, true, nil
	default:
		return false, false, fmt.Errorf("invalid value for environment variable, %s=%s, need true or false", name, v)
	}
}

func firstSet(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}
