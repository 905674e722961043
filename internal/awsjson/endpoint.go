package awsjson

import (
	"context"
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// resolveEndpoint is the service's endpoint as the SDK's client resolves
// it: AWS_ENDPOINT_URL_<SERVICE> (from the configuration's sources), else
// the configuration's BaseEndpoint (AWS_ENDPOINT_URL), else the region's
// endpoint in its partition, FIPS and dual-stack as the sources ask
// (AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT).
func resolveEndpoint(cfg aws.Config, svc Service) (string, error) {
	ctx := context.Background()
	if !ignoreConfiguredEndpoints(ctx, cfg.ConfigSources) {
		for _, src := range cfg.ConfigSources {
			if s, ok := src.(interface {
				GetServiceBaseEndpoint(context.Context, string) (string, bool, error)
			}); ok {
				v, found, err := s.GetServiceBaseEndpoint(ctx, svc.ID)
				if err != nil {
					break
				}
				if found {
					return v, nil
				}
			}
		}
	}
	if cfg.BaseEndpoint != nil {
		return *cfg.BaseEndpoint, nil
	}
	if cfg.Region == "" {
		return "", errors.New("no AWS region: AWS_REGION, which Lambda sets, or aws.Config.Region")
	}
	var fips, dual bool
	for _, src := range cfg.ConfigSources {
		if s, ok := src.(interface {
			GetUseFIPSEndpoint(context.Context) (aws.FIPSEndpointState, bool, error)
		}); ok {
			if v, found, err := s.GetUseFIPSEndpoint(ctx); err == nil && found {
				fips = v == aws.FIPSEndpointStateEnabled
			}
		}
		if s, ok := src.(interface {
			GetUseDualStackEndpoint(context.Context) (aws.DualStackEndpointState, bool, error)
		}); ok {
			if v, found, err := s.GetUseDualStackEndpoint(ctx); err == nil && found {
				dual = v == aws.DualStackEndpointStateEnabled
			}
		}
	}
	return regionalEndpoint(svc, cfg.Region, fips, dual), nil
}

// ignoreConfiguredEndpoints is AWS_IGNORE_CONFIGURED_ENDPOINT_URLS, as the
// first source that sets it says (the SDK then ignores the services' own
// endpoint variables; AWS_ENDPOINT_URL is already out of BaseEndpoint).
func ignoreConfiguredEndpoints(ctx context.Context, sources []any) bool {
	for _, src := range sources {
		if s, ok := src.(interface {
			GetIgnoreConfiguredEndpoints(context.Context) (bool, bool, error)
		}); ok {
			if v, found, err := s.GetIgnoreConfiguredEndpoints(ctx); err == nil && found {
				return v
			}
		}
	}
	return false
}

// partition is the part of an AWS partition an endpoint is made of.
type partition struct {
	id                      string
	dnsSuffix, dualStackDNS string
}

// The SDK's partitions (internal/endpoints/awsrulesfn), which every
// service's endpoint rules use; the first is the default.
var (
	awsPartition = partition{"aws", "amazonaws.com", "api.aws"}
	partitions   = map[string]partition{
		"cn":      {"aws-cn", "amazonaws.com.cn", "api.amazonwebservices.com.cn"},
		"eusc-de": {"aws-eusc", "amazonaws.eu", "api.amazonwebservices.eu"},
		"us-iso":  {"aws-iso", "c2s.ic.gov", "api.aws.ic.gov"},
		"us-isob": {"aws-iso-b", "sc2s.sgov.gov", "api.aws.scloud"},
		"eu-isoe": {"aws-iso-e", "cloud.adc-e.uk", "api.cloud-aws.adc-e.uk"},
		"us-isof": {"aws-iso-f", "csp.hci.ic.gov", "api.aws.hci.ic.gov"},
		"us-gov":  {"aws-us-gov", "amazonaws.com", "api.aws"},
	}
)

// partitionOf is the region's partition, as the SDK's patterns match a
// region: <prefix>-<word>-<number>, the prefix naming the partition
// ("us-gov", "cn", ...; us, eu, ap, sa, ca, me, af, il and mx for aws);
// the default for a region of no pattern. A loop, not the SDK's regular
// expressions: a package's patterns compile at every cold start.
func partitionOf(region string) partition {
	parts := strings.Split(region, "-")
	if len(parts) < 3 || !isNumber(parts[len(parts)-1]) || !isWord(parts[len(parts)-2]) {
		return awsPartition
	}
	if p, ok := partitions[strings.Join(parts[:len(parts)-2], "-")]; ok {
		return p
	}
	return awsPartition
}

func isNumber(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// isWord is \w+: letters, digits and '_'.
func isWord(s string) bool {
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return s != ""
}

// regionalEndpoint is the service's endpoint in region, as its rules give
// it: https://<prefix>[-fips].<region>.<suffix>, the partition's
// dual-stack suffix for dual-stack, with the services' exceptions:
// Secrets Manager's dual-stack endpoints in the aws and aws-us-gov
// partitions (and aws-cn's without FIPS) are its standard names, and EventBridge's FIPS endpoints in
// GovCloud (US) are its standard ones.
func regionalEndpoint(svc Service, region string, fips, dual bool) string {
	p := partitionOf(region)
	suffix := p.dnsSuffix
	if dual && !(svc.ID == SecretsManager.ID && (p.id == "aws" || p.id == "aws-us-gov" || (p.id == "aws-cn" && !fips))) {
		suffix = p.dualStackDNS
	}
	prefix := svc.EndpointPrefix
	if fips && !(svc.ID == EventBridge.ID && (region == "us-gov-east-1" || region == "us-gov-west-1")) {
		prefix += "-fips"
	}
	return "https://" + prefix + "." + region + "." + suffix
}
