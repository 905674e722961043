//go:build lambdajobs.notracing

package withtracing

import "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"

// Tracing is nil: this build links no tracing, and refuses JOBS_TRACING=on.
func Tracing() lambdafn.Tracing { return nil }
