package examplekinds

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Receipt is the kind of the transactional-enqueue example
// (examples/order-receipt): send the receipt of an order written in the
// same DynamoDB transaction as the job.
const Receipt = "example.receipt"

// ReceiptPayload is example.receipt's payload.
type ReceiptPayload struct {
	OrderID string `json:"order_id"`
	Email   string `json:"email"`
	Cents   int64  `json:"cents"`
}

// ReceiptResult is example.receipt's result: the address is masked in the
// public JSON.
type ReceiptResult struct {
	OrderID string
	Email   string
}

// PublicJSON returns the order id and the masked address.
func (r ReceiptResult) PublicJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"order_id": r.OrderID, "sent_to": mask(r.Email)})
}

func mask(email string) string {
	user, domain, ok := strings.Cut(email, "@")
	if !ok || user == "" {
		return "***"
	}
	return user[:1] + "***@" + domain
}

// CodeNoEmail: the order has no address to send the receipt to.
const CodeNoEmail = "no_email"

// SendReceipt runs example.receipt (it pretends to send an e-mail).
func SendReceipt(_ context.Context, job *jobs.Job[ReceiptPayload]) (ReceiptResult, error) {
	if !strings.Contains(job.Payload.Email, "@") {
		return ReceiptResult{}, jobs.Fail(CodeNoEmail, nil)
	}
	return ReceiptResult{OrderID: job.Payload.OrderID, Email: job.Payload.Email}, nil
}
