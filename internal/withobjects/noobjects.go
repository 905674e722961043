//go:build lambdajobs.noobjects

package withobjects

import "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"

// Objects is nil: this build links no S3 client, and a registry with large
// parts refuses to start.
func Objects() lambdafn.ObjectTier { return nil }
