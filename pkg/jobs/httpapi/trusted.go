package httpapi

import (
	"slices"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

var errNotTrusted = &requestError{code: "forbidden", detail: `only the deployment's trusted callers may give "tenant" or "lane": leave them out (the job is the caller's own, in its kind's lane)`}

// checkChoices refuses a tenant or a lane from a caller who may not
// choose them.
func (a *API) checkChoices(caller string, opts jobs.EnqueueOpts) error {
	if (opts.Tenant == "" && opts.Lane == "") || slices.Contains(a.trusted, caller) {
		return nil
	}
	return errNotTrusted
}
