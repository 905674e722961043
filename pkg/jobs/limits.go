package jobs

// Limits that keep a job's item well under DynamoDB's 400 KB item limit:
// payload + result + attributes stay below 260 KB.
const (
	// MaxPayloadBytes is the largest payload accepted at enqueue.
	MaxPayloadBytes = 128 << 10
	// MaxResultBytes is the largest public JSON of a result, partial or final.
	MaxResultBytes = 128 << 10
)
