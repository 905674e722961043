package wire

// GroupID is the message group id of a tenant's messages (TenantOf's):
// SQS fair queues serve each group fairly against the others. A hash, so
// an owner (an ARN, a subject) never appears in a message attribute, and
// within SQS's 128 characters.
func GroupID(tenant string) string { return "t" + OwnerKey(tenant) }

// TenantOf is who owner's job with tenant is for, as fair-queue groups and
// per-tenant limits key it: the owner itself when tenant is empty or the
// owner, else the pair. A tenant is always within its owner's, so no
// owner's tenant is another owner's, or another owner: owner A naming B as
// its tenant gets a group and limit keys of its own, never B's. (Owners and
// tenants are printable ASCII: the newline joining them appears in
// neither.)
func TenantOf(owner, tenant string) string {
	if tenant == "" || tenant == owner {
		return owner
	}
	return owner + "\n" + tenant
}
