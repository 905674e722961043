package jobsinfra

import (
	"strings"
	"testing"
)

// Validate refuses settings that contradict each other, or that the
// construct or Lambda owns.
func TestConfigRefuses(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"reserved":                             func(c *Config) { c.Environment = map[string]string{"JOBS_TABLE": "other"} },
		"aws":                                  func(c *Config) { c.FunctionEnvironment = map[string]map[string]string{"worker": {"AWS_REGION": "x"}} },
		"unknown fn":                           func(c *Config) { c.FunctionEnvironment = map[string]map[string]string{"wroker": {"A": "1"}} },
		"architecture":                         func(c *Config) { c.Architecture = "arm" },
		"log level":                            func(c *Config) { c.LogLevel = "warn" },
		"reserve below write":                  func(c *Config) { c.HandlerReserve = c.FinalWriteTimeout },
		"grace within timeout":                 func(c *Config) { c.DispatchGrace = c.WorkerTimeout },
		"empty name":                           func(c *Config) { c.Name = "" },
		"upper-case name":                      func(c *Config) { c.Name = "Prod" },
		"name with a space":                    func(c *Config) { c.Name = "has space" },
		"name over 20 letters":                 func(c *Config) { c.Name = strings.Repeat("a", 21) },
		"batch throttle over":                  func(c *Config) { c.BatchThrottleRate = c.ThrottleRate + 1 },
		"callback throttle over":               func(c *Config) { c.CallbackThrottleRate = c.ThrottleRate + 1 },
		"no callback throttle":                 func(c *Config) { c.CallbackThrottleBurst = 0 },
		"four tag indexes":                     func(c *Config) { four := 4; c.TagIndexes = &four },
		"maximum concurrency 1":                func(c *Config) { c.MaxConcurrency = 1 },
		"trusted with a comma":                 func(c *Config) { c.TrustedCallers = []string{"arn:aws:iam::123456789012:role/a,b"} },
		"empty operator":                       func(c *Config) { c.Operators = []string{""} },
		"negative enqueue rate":                func(c *Config) { c.EnqueueRatePerOwner = -1 },
		"no wait concurrency":                  func(c *Config) { c.WaitConcurrency = 0 },
		"waits per owner past the concurrency": func(c *Config) { c.WaitConcurrency, c.WaitsPerOwner = 4, 5 },
		"the default waits per owner past it":  func(c *Config) { c.WaitConcurrency, c.WaitsPerOwner = 10, 0 },
		"waits per owner past 200":             func(c *Config) { c.WaitConcurrency, c.WaitsPerOwner = 1000, 201 },
	} {
		c := DevConfig("dev")
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := DevConfig("dev").Validate(); err != nil {
		t.Errorf("dev: %v", err)
	}
}

// An environment that retains data cannot synthesize without somebody to
// alarm.
func TestRetainedEnvironmentsNeedAnAlarmDestination(t *testing.T) {
	if err := ProdConfig("prod").Validate(); err == nil || !strings.Contains(err.Error(), "alarm destination") {
		t.Fatalf("prod without an alarm destination: %v", err)
	}
	for _, with := range []func(*Config){
		func(c *Config) { c.AlarmEmail = "oncall@example.com" },
		func(c *Config) { c.AlarmTopicARN = "arn:aws:sns:us-east-1:123456789012:oncall" },
	} {
		c := ProdConfig("prod")
		with(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("prod with an alarm destination: %v", err)
		}
	}
}
