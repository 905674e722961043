//go:build !lambdajobs.noobjects

package withobjects

import (
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/s3objects"
)

// Objects is the functions' object tier: S3.
func Objects() lambdafn.ObjectTier { return s3objects.Tier{} }
