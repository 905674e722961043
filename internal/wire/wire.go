// Package wire holds the names and shapes that cross the system's
// boundaries without being anyone's public API: job ids and how they are
// derived, owner keys, the bodies schedule fires send, the trace header a
// message carries. Package jobs, its drivers, the local stack, the CLI and
// the CDK construct all read them from here, so each is written once.
package wire
