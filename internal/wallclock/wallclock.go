// Package wallclock is the real clock, the default of every injectable
// clock in package jobs and its stores.
package wallclock

import "time"

// Clock tells the real time.
type Clock struct{}

// Now returns time.Now().
func (Clock) Now() time.Time { return time.Now() }
