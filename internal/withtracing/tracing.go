//go:build !lambdajobs.notracing

package withtracing

import (
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing"
)

// Tracing is the functions' tracing: spans to the X-Ray daemon.
func Tracing() lambdafn.Tracing { return tracing.XRay() }
