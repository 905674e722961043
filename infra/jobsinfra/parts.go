package jobsinfra

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/s3objects"
)

// parts creates the bucket of the payloads and results kept as objects,
// when the registry has a kind that allows them (JobsProps.LargeParts):
// encrypted (with the customer-managed key when there is one), public
// access blocked, TLS only, objects owned by the bucket's account, and
// their data read and written by the roles the descriptor grants it
// (deploy.Parts) and no other principal (partsPolicy). Each object lasts as
// its tag says (s3objects.TagKeep): one lifecycle rule per lifetime of
// s3objects.KeepDays; uploads expire after a day, and multipart writes
// left unfinished are aborted after a day. No code calls a bucket configuration API at run time: all
// of it is here.
func (s *Jobs) parts() {
	if !s.largeParts {
		return
	}
	rules := []*awss3.LifecycleRule{{
		Id: jsii.String("abort-unfinished-writes"), Enabled: jsii.Bool(true),
		AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
	}}
	// Uploads rest under uploads/ until a worker validates them (and
	// deletes them), within 20 minutes of their start: a day is a backstop.
	rules = append(rules, &awss3.LifecycleRule{
		Id: jsii.String("uploads-1-day"), Enabled: jsii.Bool(true),
		Prefix:     jsii.String(uploadsPrefix),
		Expiration: awscdk.Duration_Days(jsii.Number(1)),
	})
	for _, days := range s3objects.KeepDays {
		rules = append(rules, &awss3.LifecycleRule{
			Id: jsii.String(fmt.Sprintf("keep-%d-days", days)), Enabled: jsii.Bool(true),
			Prefix:     jsii.String(partsPrefix),
			TagFilters: &map[string]any{s3objects.TagKeep: strconv.Itoa(days)},
			Expiration: awscdk.Duration_Days(jsii.Number(float64(days))),
		})
	}
	props := &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		LifecycleRules:    &rules,
		RemovalPolicy:     s.removal,
	}
	if c := s.cfg.CORS; c != nil {
		// A browser on the API's origins PUTs its parts to the upload's
		// links and reads each part's ETag, which completing it sends.
		// Nothing else: the links are the only way in, and they sign
		// the part's length.
		props.Cors = &[]*awss3.CorsRule{{
			AllowedOrigins: jsii.Strings(c.AllowOrigins...),
			AllowedMethods: &[]awss3.HttpMethods{awss3.HttpMethods_PUT},
			AllowedHeaders: jsii.Strings("content-type"),
			ExposedHeaders: jsii.Strings("ETag"),
			MaxAge:         jsii.Number(3600),
		}}
	}
	if s.Key != nil {
		// A bucket key: S3 asks KMS for a data key per bucket and hour,
		// not per object.
		props.Encryption, props.EncryptionKey, props.BucketKeyEnabled = awss3.BucketEncryption_KMS, s.Key, jsii.Bool(true)
	}
	s.Parts = awss3.NewBucket(s.Construct, jsii.String("Parts"), props)
	cdknag.NagSuppressions_AddResourceSuppressions(s.Parts, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-S1"),
		Reason: jsii.String("The parts bucket holds job payloads and results that only the construct's roles read and write (its policy denies every other principal); " +
			"their access is the functions' own logs and, when wanted, CloudTrail data events, not a second bucket of access logs."),
	}}, jsii.Bool(true))
}

// partsPrefix is where the objects rest (dynamostore's object keys);
// uploadsPrefix where the callers' uploads do until they are validated
// (jobs.Service.StartUpload's keys).
const (
	partsPrefix   = "parts/"
	uploadsPrefix = "uploads/"
)

// partsPolicy denies the objects' data to every principal but the roles
// the descriptor grants it (the construct's functions, GrantEnqueue's),
// whatever their own policies allow; AWS services and the bucket's
// configuration (CloudFormation's) are not data actions. The actions are
// families: a GET with a versionId is authorised as s3:GetObjectVersion
// alone (even in a bucket without versioning, as versionId=null), so
// naming s3:GetObject would leave the objects readable that way.
func (s *Jobs) partsPolicy() {
	if s.Parts == nil {
		return
	}
	s.Parts.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyItsRoles"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("s3:GetObject*", "s3:PutObject*", "s3:DeleteObject*", "s3:AbortMultipartUpload", "s3:RestoreObject", "s3:ReplicateObject"),
		Resources:  jsii.Strings(*s.Parts.BucketArn() + "/*"),
		Conditions: &map[string]any{
			"ArnNotLike": map[string]any{"aws:PrincipalArn": s.partUsers.list()},
		},
	}))
}
