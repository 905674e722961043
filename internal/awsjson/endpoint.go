package awsjson

import (
	"context"
	"errors"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// resolveEndpoint is the service's endpoint as the SDK's client resolves
// it: AWS_ENDPOINT_URL_<SERVICE> (from the configuration's sources), else
// the configuration's BaseEndpoint (AWS_ENDPOINT_URL), else the region's
// endpoint in its partition, FIPS and dual-stack as the sources ask
// (AWS_USE_FIPS_ENDPOINT, AWS_USE_DUALSTACK_ENDPOINT).
func resolveEndpoint(cfg aws.Config, svc Service) (string, error) {
	ctx := context.Background()
	for _, src := range cfg.ConfigSources {
		if s, ok := src.(interface {
			GetServiceBaseEndpoint(context.Context, string) (string, bool, error)
		}); ok {
			if v, found, err := s.GetServiceBaseEndpoint(ctx, svc.ID); err == nil && found {
				return v, nil
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

// partition is the part of an AWS partition an endpoint is made of.
type partition struct {
	id                      string
	regions                 *regexp.Regexp
	dnsSuffix, dualStackDNS string
}

// partitions are the SDK's (internal/endpoints/awsrulesfn), which every
// service's endpoint rules use; the first is the default.
var partitions = []partition{
	{"aws", regexp.MustCompile(`^(us|eu|ap|sa|ca|me|af|il|mx)\-\w+\-\d+$`), "amazonaws.com", "api.aws"},
	{"aws-cn", regexp.MustCompile(`^cn\-\w+\-\d+$`), "amazonaws.com.cn", "api.amazonwebservices.com.cn"},
	{"aws-eusc", regexp.MustCompile(`^eusc\-(de)\-\w+\-\d+$`), "amazonaws.eu", "api.amazonwebservices.eu"},
	{"aws-iso", regexp.MustCompile(`^us\-iso\-\w+\-\d+$`), "c2s.ic.gov", "api.aws.ic.gov"},
	{"aws-iso-b", regexp.MustCompile(`^us\-isob\-\w+\-\d+$`), "sc2s.sgov.gov", "api.aws.scloud"},
	{"aws-iso-e", regexp.MustCompile(`^eu\-isoe\-\w+\-\d+$`), "cloud.adc-e.uk", "api.cloud-aws.adc-e.uk"},
	{"aws-iso-f", regexp.MustCompile(`^us\-isof\-\w+\-\d+$`), "csp.hci.ic.gov", "api.aws.hci.ic.gov"},
	{"aws-us-gov", regexp.MustCompile(`^us\-gov\-\w+\-\d+$`), "amazonaws.com", "api.aws"},
}

// partitionOf is the region's partition (the default for a region no
// pattern matches, as the SDK's rules have it).
func partitionOf(region string) partition {
	for _, p := range partitions {
		if p.regions.MatchString(region) {
			return p
		}
	}
	return partitions[0]
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
