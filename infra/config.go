package main

import (
	"github.com/lambdajobs/lambdajobs/infra/jobsinfra"
)

// The configuration types are the construct's (package jobsinfra).
type (
	Config            = jobsinfra.Config
	JWTConfig         = jobsinfra.JWTConfig
	CORSConfig        = jobsinfra.CORSConfig
	S3Source          = jobsinfra.S3Source
	EventBridgeSource = jobsinfra.EventBridgeSource
)

// ConfigFor returns the configuration of the named environment, from
// jobsinfra's presets: prod's, or dev's for any other name. Only
// environments other than prod carry the example kinds (see
// StackProps.ExampleKinds).
func ConfigFor(name string) (Config, error) {
	c := jobsinfra.DevConfig(name)
	if name == "prod" {
		c = jobsinfra.ProdConfig(name)
	}
	return c, c.Validate()
}
