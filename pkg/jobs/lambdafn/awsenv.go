package lambdafn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go/logging"
)

// The functions' AWS configuration comes from the environment Lambda gives
// them, read here, rather than from the SDK's shared-config loader
// (config.LoadDefaultConfig). In Lambda the two are the same: the region is
// AWS_REGION, the credentials are the execution role's, in
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, and there
// is no shared config or credentials file; the construct lets no team set an
// AWS_ variable of its own. The local stack sets the same variables and
// AWS_ENDPOINT_URL_DYNAMODB, _SQS and _SCHEDULER. The loader does the same
// with them (TestAWSConfigFromEnvResolvesAsTheSharedLoader holds the two
// equal) but it links the SDK's SSO, SSO OIDC, STS and sign-in clients and
// the instance metadata client for the credential sources Lambda never
// uses, whose package initialisation and size a cold start paid for.
//
// Read, as the loader reads them: AWS_REGION (else AWS_DEFAULT_REGION);
// AWS_ACCESS_KEY_ID (or AWS_ACCESS_KEY), AWS_SECRET_ACCESS_KEY (or
// AWS_SECRET_KEY), AWS_SESSION_TOKEN, AWS_ACCOUNT_ID; AWS_ENDPOINT_URL,
// AWS_ENDPOINT_URL_<SERVICE>, AWS_IGNORE_CONFIGURED_ENDPOINT_URLS;
// AWS_CA_BUNDLE; AWS_MAX_ATTEMPTS, AWS_RETRY_MODE; AWS_USE_FIPS_ENDPOINT,
// AWS_USE_DUALSTACK_ENDPOINT. Not read: the shared config and credentials
// files and the profile (AWS_PROFILE), and the credential sources other
// than the environment (web identity, SSO, containers, instance metadata).
// A process without credentials in its environment gets an error naming
// them at its first AWS call; a program outside Lambda that takes its
// credentials from those sources uses NewServiceWithConfig.

// envCredentialsSource is the credentials' Source, as the shared loader
// names credentials from the environment.
const envCredentialsSource = "EnvConfigCredentials"

// errNoEnvCredentials is what an AWS call answers when the environment
// holds no credentials.
var errNoEnvCredentials = errors.New("lambdafn: no AWS credentials in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, which Lambda sets); " +
	"a program that takes them from a profile, SSO or instance metadata loads its own configuration and calls lambdafn.NewServiceWithConfig")

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
	creds := aws.Credentials{
		AccessKeyID:     firstSet(getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_ACCESS_KEY")),
		SecretAccessKey: firstSet(getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SECRET_KEY")),
		SessionToken:    getenv("AWS_SESSION_TOKEN"),
		AccountID:       getenv("AWS_ACCOUNT_ID"),
		Source:          envCredentialsSource,
	}
	if creds.HasKeys() {
		cfg.Credentials = aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }))
	} else {
		cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return aws.Credentials{}, errNoEnvCredentials })
	}
	var errs []error
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
