package driver_test

import (
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

func TestScheduleNames(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "daily-report_v1.2": true, strings.Repeat("n", 64): true,
		"": false, strings.Repeat("n", 65): false, "a b": false, "a/b": false, "é": false, "a*": false,
	} {
		err := driver.Schedule{Name: name, Expression: "rate(1 hour)"}.Check()
		if got := err == nil || !strings.Contains(err.Error(), "the name must be"); got != want {
			t.Errorf("schedule name %q: %v, want valid %v", name, err, want)
		}
	}
}
