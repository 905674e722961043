// Package withobjects is the object tier of this repository's seven
// functions (lambdafn.Opts.Objects): S3, through s3objects.Tier, in
// the bucket the construct creates for a registry with large parts
// (example.blob's). Built with the tag lambdajobs.noobjects, Objects is
// nil and no S3 client is linked: how docs/evidence/BENCHMARKS.md measures the
// functions a team builds without the object tier.
package withobjects
