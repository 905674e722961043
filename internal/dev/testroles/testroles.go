// Package testroles builds one role of a jobs.Client in a single call, for
// tests and rigs that need one role of a Config: the product builds its
// Client once (lambdafn, jobstest.Runner) and takes each role from it.
package testroles

import "github.com/lambdajobs/lambdajobs/pkg/jobs"

// Service is jobs.NewClient(cfg)'s Service.
func Service(cfg jobs.Config) (*jobs.Service, error) {
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return c.Service(), nil
}

// Worker is jobs.NewClient(cfg)'s Worker.
func Worker(cfg jobs.Config) (*jobs.Worker, error) {
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return c.Worker(), nil
}

// Sweeper is jobs.NewClient(cfg)'s Sweeper.
func Sweeper(cfg jobs.Config) (*jobs.Sweeper, error) {
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return c.Sweeper(), nil
}

// Schedules is jobs.NewClient(cfg)'s ScheduleService.
func Schedules(cfg jobs.Config) (*jobs.ScheduleService, error) {
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return c.Schedules(), nil
}
