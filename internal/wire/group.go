package wire

// GroupID is the message group id of a tenant's messages: SQS fair queues
// serve each group fairly against the others. A hash, so an owner (an
// ARN, a subject) never appears in a message attribute, and within SQS's
// 128 characters.
func GroupID(tenant string) string { return "t" + OwnerKey(tenant) }
