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

// This repository's environments: jobsinfra's presets.
var (
	Dev  = jobsinfra.Dev
	Prod = jobsinfra.Prod
)

// ConfigFor returns the configuration of the named environment: dev, prod,
// or any other name, which starts from dev. Only dev and environments other
// than prod carry the example kinds (see StackProps.ExampleKinds).
func ConfigFor(name string) (Config, error) {
	var c Config
	switch name {
	case "prod":
		c = Prod
	default:
		c = Dev
	}
	c.Name = name
	return c, c.Validate()
}
