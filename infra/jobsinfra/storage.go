package jobsinfra

import (
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// key creates the customer-managed key (Config.CustomerManagedKey), if
// asked for.
func (s *Jobs) key() {
	if !s.cfg.CustomerManagedKey {
		return
	}
	s.Key = awskms.NewKey(s.Construct, jsii.String("Key"), &awskms.KeyProps{
		Description:       jsii.String("lambdajobs " + s.cfg.Name + ": encrypts the jobs table, the queues and the keys' secrets"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     s.removal,
	})
	// Whatever a role's own policy allows (an administrator's kms:*), the
	// key encrypts and decrypts only through the services that hold the
	// construct's data, or for an AWS service (S3 and EventBridge sending
	// to an encrypted queue): a direct call, to decrypt a blob copied out
	// of the table or a queue, is refused.
	via := []*string{s.viaService("dynamodb"), s.viaService("sqs"), s.viaService("secretsmanager")}
	if s.largeParts {
		via = append(via, s.viaService("s3")) // the parts bucket
	}
	s.Key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyThroughItsServices"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(keyCryptoActions...),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{
			"StringNotEquals": map[string]any{"kms:ViaService": &via},
			"BoolIfExists":    map[string]any{"aws:PrincipalIsAWSService": "false"},
		},
	}), jsii.Bool(false))
}

// keyCryptoActions are the key's uses for data (its management is left
// to the key policy's administrators).
var keyCryptoActions = []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:ReEncrypt*"}

// queueEncryption is how the construct's queues are encrypted: with the
// customer-managed key if there is one, else SQS's own.
func (s *Jobs) queueEncryption() awssqs.QueueEncryption {
	if s.Key != nil {
		return awssqs.QueueEncryption_KMS
	}
	return awssqs.QueueEncryption_SQS_MANAGED
}

// table creates the jobs table, from dynamostore's one definition.
func (s *Jobs) table() {
	props := &awsdynamodb.TableProps{
		BillingMode: awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(s.cfg.Retain),
		},
		DeletionProtection: jsii.Bool(s.cfg.Retain),
		RemovalPolicy:      s.removal,
	}
	s.fixTable(props)
	s.overrides.table(props)
	s.fixTable(props)
	s.Table = awsdynamodb.NewTable(s.Construct, jsii.String("Jobs"), props)
	if !s.cfg.Retain {
		cdknag.NagSuppressions_AddResourceSuppressions(s.Table, &[]*cdknag.NagPackSuppression{{
			Id:     jsii.String("AwsSolutions-DDB3"),
			Reason: jsii.String("A non-retained environment's table is disposable (it is deleted with the stack); retained environments such as prod enable point-in-time recovery."),
		}}, jsii.Bool(true))
	}
	s.tableIndexes()
}

// fixTable sets the props of the table that the construct re-asserts
// after Overrides.Table (see there).
func (s *Jobs) fixTable(props *awsdynamodb.TableProps) {
	props.PartitionKey = &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrID), Type: awsdynamodb.AttributeType_STRING}
	props.SortKey = nil
	props.TimeToLiveAttribute = jsii.String(dynamostore.AttrExpires)
	props.Encryption, props.EncryptionKey = awsdynamodb.TableEncryption_AWS_MANAGED, nil
	if s.Key != nil {
		props.Encryption, props.EncryptionKey = awsdynamodb.TableEncryption_CUSTOMER_MANAGED, s.Key
	}
}

// tableIndexes adds the table's indexes, each as dynamostore defines it
// (the sweep index, the listing's), so the table here and the local one
// cannot drift.
func (s *Jobs) tableIndexes() {
	def := dynamostore.CreateTableInput("jobs")
	attrType := map[string]awsdynamodb.AttributeType{}
	for _, a := range def.AttributeDefinitions {
		attrType[*a.AttributeName] = map[ddbtypes.ScalarAttributeType]awsdynamodb.AttributeType{
			ddbtypes.ScalarAttributeTypeS: awsdynamodb.AttributeType_STRING, ddbtypes.ScalarAttributeTypeN: awsdynamodb.AttributeType_NUMBER,
		}[a.AttributeType]
	}
	for _, g := range def.GlobalSecondaryIndexes {
		if i := slices.Index(dynamostore.TagIndexes[:], *g.IndexName); i >= s.cfg.tagIndexes() {
			continue // not yet: Config.TagIndexes
		}
		props := &awsdynamodb.GlobalSecondaryIndexProps{IndexName: g.IndexName}
		for _, k := range g.KeySchema {
			attr := &awsdynamodb.Attribute{Name: k.AttributeName, Type: attrType[*k.AttributeName]}
			if k.KeyType == ddbtypes.KeyTypeHash {
				props.PartitionKey = attr
			} else {
				props.SortKey = attr
			}
		}
		switch g.Projection.ProjectionType {
		case ddbtypes.ProjectionTypeKeysOnly:
			props.ProjectionType = awsdynamodb.ProjectionType_KEYS_ONLY
		case ddbtypes.ProjectionTypeInclude:
			props.ProjectionType = awsdynamodb.ProjectionType_INCLUDE
			props.NonKeyAttributes = jsii.Strings(g.Projection.NonKeyAttributes...)
		default:
			props.ProjectionType = awsdynamodb.ProjectionType_ALL
		}
		s.Table.AddGlobalSecondaryIndex(props)
	}
}

// queues creates the queue pair, from sqsqueue's one definition.
func (s *Jobs) queues() {
	// Visibility: twice the worker timeout plus the batching window, the
	// dead-worker bound (sqsqueue.Spec says why not AWS's six times).
	spec := sqsqueue.SpecFor(s.cfg.WorkerTimeout, s.cfg.BatchWindow)
	s.DLQ = s.queue("DeadLetters", "dead-letters", &awssqs.QueueProps{RetentionPeriod: dur(spec.DLQRetention)}, nil)
	s.Queue = s.queue("Jobs"+"Queue", "jobs", &awssqs.QueueProps{RetentionPeriod: dur(spec.Retention)}, func(props *awssqs.QueueProps) {
		props.VisibilityTimeout = dur(spec.VisibilityTimeout)
		props.DeadLetterQueue = &awssqs.DeadLetterQueue{Queue: s.DLQ, MaxReceiveCount: jsii.Number(float64(spec.MaxReceiveCount))}
	})
	s.Lanes[""] = &Lane{Queue: s.Queue, DLQ: s.DLQ, Config: s.cfg.lane("")}
}

// queue creates one of the construct's queues (named for
// Overrides.Queue), re-asserting its encryption, TLS, a standard queue,
// its removal policy, and what fix sets.
func (s *Jobs) queue(id, name string, props *awssqs.QueueProps, fix func(*awssqs.QueueProps)) awssqs.Queue {
	fixAll := func() {
		if fix != nil {
			fix(props)
		}
		props.Encryption, props.EncryptionMasterKey, props.EnforceSSL, props.Fifo = s.queueEncryption(), s.Key, jsii.Bool(true), nil
		// A retained environment keeps its queues (and the jobs and dead
		// letters in them) when the stack is deleted, as it keeps the table.
		props.RemovalPolicy = s.removal
	}
	fixAll()
	s.overrides.queue(name, props)
	fixAll()
	return awssqs.NewQueue(s.Construct, jsii.String(id), props)
}

// secrets creates the two keys the functions read at cold start, each
// readable only by its readers (onlyReaders).
func (s *Jobs) secrets() {
	// The key that seals secret payload fields, generated once per stack.
	s.payloadSecret = awssecretsmanager.NewSecret(s.Construct, jsii.String("PayloadSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("lambdajobs " + s.cfg.Name + ": seals payload fields tagged jobs:\"secret\""),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true),
		},
		EncryptionKey: s.Key,
		RemovalPolicy: s.removal,
	})
	s.onlyReaders(s.payloadSecret, s.payloadReaders)
	cdknag.NagSuppressions_AddResourceSuppressions(s.payloadSecret, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SMG4"),
		Reason: jsii.String("The payload sealing key cannot rotate on a schedule: values sealed with the old key must stay " +
			"readable until their jobs expire, so a new key is added ahead of the old one (" + deploy.EnvPayloadKey.Name + " is a key ring) " +
			"and the old one removed after the retention; see docs/operations/OPERATIONS.md."),
	}}, jsii.Bool(true))

	// The key that signs the listing's page tokens: protects no data
	// (owners are checked on every read), so it is not retained.
	s.pageSecret = awssecretsmanager.NewSecret(s.Construct, jsii.String("PageTokenSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("lambdajobs " + s.cfg.Name + ": signs the page tokens of GET /v1/jobs and bulk actions"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true),
		},
		EncryptionKey: s.Key,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	s.onlyReaders(s.pageSecret, s.pageReaders)
	cdknag.NagSuppressions_AddResourceSuppressions(s.pageSecret, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SMG4"),
		Reason: jsii.String("The page token key signs listing positions only; rotating it invalidates the page tokens in flight, " +
			"which a caller recovers from by listing again. Rotate it by hand if wanted (docs/operations/OPERATIONS.md)."),
	}}, jsii.Bool(true))
}
