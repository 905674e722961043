package iamcalls

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Names says what the local stack's resources are in the deployment: its
// table's name, and its queues' URLs.
type Names struct {
	Table string
	Queue string
	DLQ   string
	// EventBus is the job events' bus (its name or ARN, as the functions
	// are told it).
	EventBus string
	// LaneQueues and LaneDLQs are the other lanes' queues' URLs, by lane:
	// recorded as "queue/LANE" and "dlq/LANE".
	LaneQueues, LaneDLQs map[string]string
	// Bucket is the parts bucket's name (MapS3).
	Bucket string
}

func (n Names) table(name string) (string, error) {
	if name == n.Table {
		return "table", nil
	}
	return "", fmt.Errorf("iamcalls: table %q is not the stack's", name)
}

func (n Names) queue(url string) (string, error) {
	switch url {
	case n.Queue:
		return "queue", nil
	case n.DLQ:
		return "dlq", nil
	}
	for lane, u := range n.LaneQueues {
		if u == url {
			return "queue/" + lane, nil
		}
	}
	for lane, u := range n.LaneDLQs {
		if u == url {
			return "dlq/" + lane, nil
		}
	}
	return "", fmt.Errorf("iamcalls: queue %q is not the stack's", url)
}

// Map returns the authorisations AWS makes for one request of the JSON
// protocol (target is its X-Amz-Target header, such as
// "DynamoDB_20120810.TransactWriteItems" or "AmazonSQS.SendMessage"), as
// the IAM documentation of each service states them:
//
//   - DynamoDB: each operation is its own action on the table, and on the
//     index's ARN (TABLE/index/NAME) for a Query or Scan of an index;
//     BatchGetItem and BatchWriteItem are checked per table; a
//     TransactWriteItems is checked item by item as the PutItem,
//     UpdateItem, DeleteItem or ConditionCheckItem it holds, and a
//     TransactGetItems as GetItem, each with dynamodb:EnclosingOperation.
//   - SQS: each operation is its own action on the queue, but the batch
//     forms, which are checked as the single ones (SendMessageBatch as
//     sqs:SendMessage, DeleteMessageBatch as sqs:DeleteMessage,
//     ChangeMessageVisibilityBatch as sqs:ChangeMessageVisibility).
//   - EventBridge: PutEvents is events:PutEvents on each bus its entries
//     name (the account's default bus for an entry that names none).
//
// An operation it does not know is an error, so a new kind of call cannot
// go unchecked.
func Map(principal, target string, body []byte, n Names) ([]Call, error) {
	service, op, ok := strings.Cut(target, ".")
	if !ok {
		return nil, fmt.Errorf("iamcalls: target %q", target)
	}
	switch service {
	case "DynamoDB_20120810":
		return mapDynamoDB(principal, op, body, n)
	case "AmazonSQS":
		return mapSQS(principal, op, body, n)
	case "AWSEvents":
		return mapEvents(principal, op, body, n)
	}
	return nil, fmt.Errorf("iamcalls: service %q", service)
}

type ddbRequest struct {
	TableName     string
	IndexName     string
	RequestItems  map[string]json.RawMessage
	TransactItems []map[string]struct {
		TableName string
	}
}

func mapDynamoDB(principal, op string, body []byte, n Names) ([]Call, error) {
	var req ddbRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("iamcalls: DynamoDB %s body: %w", op, err)
	}
	one := func(action, table string, ctx map[string]string) (Call, error) {
		res, err := n.table(table)
		return Call{Principal: principal, Action: "dynamodb:" + action, Resource: res, Context: ctx}, err
	}
	var calls []Call
	add := func(action, table string, ctx map[string]string) error {
		c, err := one(action, table, ctx)
		calls = append(calls, c)
		return err
	}
	var err error
	switch op {
	case "PutItem", "GetItem", "UpdateItem", "DeleteItem", "DescribeTable", "DescribeTimeToLive":
		err = add(op, req.TableName, nil)
	case "Query", "Scan":
		var c Call
		if c, err = one(op, req.TableName, nil); err == nil && req.IndexName != "" {
			c.Resource += "/index/" + req.IndexName
		}
		calls = append(calls, c)
	case "BatchGetItem", "BatchWriteItem":
		if len(req.RequestItems) == 0 {
			return nil, fmt.Errorf("iamcalls: %s without RequestItems", op)
		}
		for table := range req.RequestItems {
			if err = add(op, table, nil); err != nil {
				break
			}
		}
	case "TransactWriteItems", "TransactGetItems":
		if len(req.TransactItems) == 0 {
			return nil, fmt.Errorf("iamcalls: %s without TransactItems", op)
		}
		actions := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
		for _, item := range req.TransactItems {
			for kind, v := range item {
				action, ok := actions[kind]
				if !ok {
					return nil, fmt.Errorf("iamcalls: %s item %q", op, kind)
				}
				if err = add(action, v.TableName, map[string]string{"dynamodb:EnclosingOperation": op}); err != nil {
					break
				}
			}
		}
	default:
		return nil, fmt.Errorf("iamcalls: DynamoDB operation %s has no mapping", op)
	}
	if err != nil {
		return nil, err
	}
	return calls, nil
}

func mapSQS(principal, op string, body []byte, n Names) ([]Call, error) {
	var req struct{ QueueUrl string }
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("iamcalls: SQS %s body: %w", op, err)
	}
	action := op
	switch op {
	case "SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility", "GetQueueAttributes", "PurgeQueue":
	case "SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch":
		action = strings.TrimSuffix(op, "Batch")
	default:
		return nil, fmt.Errorf("iamcalls: SQS operation %s has no mapping", op)
	}
	res, err := n.queue(req.QueueUrl)
	if err != nil {
		return nil, err
	}
	return []Call{{Principal: principal, Action: "sqs:" + action, Resource: res}}, nil
}

func mapEvents(principal, op string, body []byte, n Names) ([]Call, error) {
	if op != "PutEvents" {
		return nil, fmt.Errorf("iamcalls: EventBridge operation %s has no mapping", op)
	}
	var req struct {
		Entries []struct{ EventBusName string }
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("iamcalls: EventBridge %s body: %w", op, err)
	}
	if len(req.Entries) == 0 {
		return nil, fmt.Errorf("iamcalls: %s without Entries", op)
	}
	seen := map[string]bool{}
	var calls []Call
	for _, e := range req.Entries {
		if e.EventBusName == "" || e.EventBusName != n.EventBus {
			return nil, fmt.Errorf("iamcalls: event bus %q is not the stack's", e.EventBusName)
		}
		if !seen[e.EventBusName] {
			seen[e.EventBusName] = true
			calls = append(calls, Call{Principal: principal, Action: "events:PutEvents", Resource: "bus"})
		}
	}
	return calls, nil
}
