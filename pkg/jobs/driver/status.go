package driver

// Status is where a job is in its life: queued -> running (a claim), then
// succeeded, failed or cancelled (the final write), or back to queued for a
// retry; a queued job can also be cancelled. Each transition is one
// conditional write in the [Store]; docs/reference/STATE_MACHINE.md draws them.
type Status string

// The statuses a job can have.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Final reports whether s is a final status: nothing changes a job after it.
func (s Status) Final() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled:
		return true
	}
	return false
}
