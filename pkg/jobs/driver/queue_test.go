package driver_test

import (
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

func TestValidLane(t *testing.T) {
	for lane, want := range map[string]bool{
		"": true, "urgent": true, "bulk-2": true, "a0123456789abcde": true,
		// "default" would read as the default lane, which is "": reserved.
		"default": false,
		"Urgent":  false, "2bulk": false, "-x": false, "a0123456789abcdef": false, "lane_1": false,
	} {
		if got := driver.ValidLane(lane); got != want {
			t.Errorf("ValidLane(%q) = %v, want %v", lane, got, want)
		}
	}
}
