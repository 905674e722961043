package jobsinfra

import (
	"fmt"
	"sort"
	"strings"
)

// cfnTemplate is a synthesized template whose intrinsic functions resolve
// to the strings CloudFormation would make of them in one account and
// region, so its policies can be evaluated as AWS would evaluate the
// deployed ones. Physical names are the logical ids (CloudFormation makes
// up others; what matters is that every reference to a resource resolves
// to the same name).
type cfnTemplate struct {
	account, region string
	resources       map[string]cfnResource
}

type cfnResource struct {
	Type       string
	Properties map[string]any
}

func newTemplate(raw map[string]any, account, region string) (*cfnTemplate, error) {
	t := &cfnTemplate{account: account, region: region, resources: map[string]cfnResource{}}
	res, ok := raw["Resources"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("template without resources")
	}
	for id, r := range res {
		m := r.(map[string]any)
		props, _ := m["Properties"].(map[string]any)
		t.resources[id] = cfnResource{Type: m["Type"].(string), Properties: props}
	}
	return t, nil
}

func (t *cfnTemplate) arn(service, resource string) string {
	return "arn:aws:" + service + ":" + t.region + ":" + t.account + ":" + resource
}

// ref is what {"Ref": id} resolves to.
func (t *cfnTemplate) ref(id string) (string, error) {
	switch id {
	case "AWS::Partition":
		return "aws", nil
	case "AWS::Region":
		return t.region, nil
	case "AWS::AccountId":
		return t.account, nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	case "AWS::StackName":
		return "stack", nil
	}
	r, ok := t.resources[id]
	if !ok {
		return "", fmt.Errorf("Ref to unknown %q", id)
	}
	switch r.Type {
	case "AWS::SQS::Queue":
		return "https://sqs." + t.region + ".amazonaws.com/" + t.account + "/" + id, nil
	case "AWS::SecretsManager::Secret":
		return t.arn("secretsmanager", "secret:"+id+"-AbCdEf"), nil
	case "AWS::Scheduler::ScheduleGroup":
		return t.resolveString(r.Properties["Name"])
	}
	return id, nil
}

// getAtt is what {"Fn::GetAtt": [id, attr]} resolves to.
func (t *cfnTemplate) getAtt(id, attr string) (string, error) {
	r, ok := t.resources[id]
	if !ok {
		return "", fmt.Errorf("GetAtt of unknown %q", id)
	}
	switch r.Type + "." + attr {
	case "AWS::IAM::Role.Arn":
		return "arn:aws:iam::" + t.account + ":role/" + id, nil
	case "AWS::SQS::Queue.Arn":
		return t.arn("sqs", id), nil
	case "AWS::SQS::Queue.QueueUrl":
		return t.ref(id)
	case "AWS::SQS::Queue.QueueName":
		return id, nil
	case "AWS::DynamoDB::Table.Arn":
		return t.arn("dynamodb", "table/"+id), nil
	case "AWS::KMS::Key.Arn":
		return t.arn("kms", "key/"+id), nil
	case "AWS::Lambda::Function.Arn":
		return t.arn("lambda", "function:"+id), nil
	case "AWS::Logs::LogGroup.Arn":
		return t.arn("logs", "log-group:"+id+":*"), nil
	case "AWS::Scheduler::ScheduleGroup.Arn":
		name, err := t.ref(id)
		return t.arn("scheduler", "schedule-group/"+name), err
	case "AWS::SNS::Topic.TopicArn":
		return t.arn("sns", id), nil
	case "AWS::ApiGatewayV2::Api.ApiEndpoint":
		return "https://" + id + ".execute-api." + t.region + ".amazonaws.com", nil
	case "AWS::Events::Rule.Arn":
		return t.arn("events", "rule/"+id), nil
	case "AWS::S3::Bucket.Arn":
		return "arn:aws:s3:::" + strings.ToLower(id), nil
	case "AWS::Events::EventBus.Arn":
		name, err := t.resolveString(r.Properties["Name"])
		return t.arn("events", "event-bus/"+name), err
	}
	return "", fmt.Errorf("GetAtt %s.%s (%s) is not modelled", id, attr, r.Type)
}

// resolve returns v with every intrinsic function resolved.
func (t *cfnTemplate) resolve(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				switch k {
				case "Ref":
					return t.ref(arg.(string))
				case "Fn::GetAtt":
					a := arg.([]any)
					return t.getAtt(a[0].(string), a[1].(string))
				case "Fn::Join":
					a := arg.([]any)
					parts, err := t.resolve(a[1])
					if err != nil {
						return nil, err
					}
					var ss []string
					for _, p := range parts.([]any) {
						ss = append(ss, fmt.Sprint(p))
					}
					return strings.Join(ss, a[0].(string)), nil
				case "Fn::Select":
					a := arg.([]any)
					list, err := t.resolve(a[1])
					if err != nil {
						return nil, err
					}
					return list.([]any)[int(a[0].(float64))], nil
				case "Fn::Split":
					a := arg.([]any)
					str, err := t.resolveString(a[1])
					if err != nil {
						return nil, err
					}
					var out []any
					for _, p := range strings.Split(str, a[0].(string)) {
						out = append(out, p)
					}
					return out, nil
				case "Fn::Sub":
					return t.sub(arg)
				case "Fn::If", "Fn::ImportValue", "Fn::FindInMap", "Fn::GetAZs", "Fn::Base64":
					return nil, fmt.Errorf("%s is not modelled", k)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := t.resolve(e)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := t.resolve(e)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

func (t *cfnTemplate) resolveString(v any) (string, error) {
	r, err := t.resolve(v)
	if err != nil {
		return "", err
	}
	s, ok := r.(string)
	if !ok {
		return "", fmt.Errorf("%v is not a string", v)
	}
	return s, nil
}

func (t *cfnTemplate) sub(arg any) (string, error) {
	var s string
	vars := map[string]any{}
	switch a := arg.(type) {
	case string:
		s = a
	case []any:
		s = a[0].(string)
		vars = a[1].(map[string]any)
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		j := strings.IndexByte(s[i:], '}')
		name := s[i+2 : i+j]
		s = s[i+j+1:]
		var val string
		var err error
		switch v, ok := vars[name]; {
		case ok:
			val, err = t.resolveString(v)
		case strings.Contains(name, "."):
			id, attr, _ := strings.Cut(name, ".")
			val, err = t.getAtt(id, attr)
		default:
			val, err = t.ref(name)
		}
		if err != nil {
			return "", err
		}
		b.WriteString(val)
	}
}

// identityPolicies returns the policies attached to the role with this
// logical id (its own and every AWS::IAM::Policy naming it), resolved.
// Managed policies are not modelled: a role of the construct has none (a
// template test asserts it).
func (t *cfnTemplate) identityPolicies(role string) ([]map[string]any, error) {
	var out []map[string]any
	add := func(doc any) error {
		r, err := t.resolve(doc)
		if err != nil {
			return err
		}
		out = append(out, r.(map[string]any))
		return nil
	}
	ids := make([]string, 0, len(t.resources))
	for id := range t.resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := t.resources[id]
		switch {
		case id == role && r.Type == "AWS::IAM::Role":
			for _, p := range asList(r.Properties["Policies"]) {
				if err := add(p.(map[string]any)["PolicyDocument"]); err != nil {
					return nil, err
				}
			}
		case r.Type == "AWS::IAM::Policy":
			for _, ref := range asList(r.Properties["Roles"]) {
				if m, ok := ref.(map[string]any); ok && m["Ref"] == role {
					if err := add(r.Properties["PolicyDocument"]); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	if _, ok := t.resources[role]; !ok {
		return nil, fmt.Errorf("no role %q", role)
	}
	return out, nil
}

// resourcePolicy returns the resource policy of the resource with this
// logical id (a queue's, a secret's, a bus's, a key's), resolved; nil if
// none.
// Several policy resources for one queue are merged.
func (t *cfnTemplate) resourcePolicy(id string) (map[string]any, error) {
	var statements []any
	var found bool
	add := func(doc any) error {
		r, err := t.resolve(doc)
		if err != nil {
			return err
		}
		found = true
		statements = append(statements, asList(r.(map[string]any)["Statement"])...)
		return nil
	}
	for _, r := range t.resources {
		var doc any
		switch r.Type {
		case "AWS::SQS::QueuePolicy":
			for _, q := range asList(r.Properties["Queues"]) {
				if m, ok := q.(map[string]any); ok && m["Ref"] == id {
					doc = r.Properties["PolicyDocument"]
				}
			}
		case "AWS::SecretsManager::ResourcePolicy":
			if m, ok := r.Properties["SecretId"].(map[string]any); ok && m["Ref"] == id {
				doc = r.Properties["ResourcePolicy"]
			}
		case "AWS::S3::BucketPolicy":
			if m, ok := r.Properties["Bucket"].(map[string]any); ok && m["Ref"] == id {
				doc = r.Properties["PolicyDocument"]
			}
		case "AWS::Events::EventBusPolicy":
			// One statement per resource, on the bus it names.
			if m, ok := r.Properties["EventBusName"].(map[string]any); ok && m["Ref"] == id {
				doc = map[string]any{"Statement": r.Properties["Statement"]}
			}
		}
		if doc != nil {
			if err := add(doc); err != nil {
				return nil, err
			}
		}
	}
	if r := t.resources[id]; r.Type == "AWS::KMS::Key" {
		if err := add(r.Properties["KeyPolicy"]); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, nil
	}
	return map[string]any{"Version": "2012-10-17", "Statement": statements}, nil
}

func asList(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		return x
	}
	return []any{v}
}
