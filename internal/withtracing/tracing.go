//go:build !lambdajobs.notracing

package withtracing

import _ "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing"
