package httpapi

import (
	"slices"
	"strings"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// WithTrustedCallers names the callers who may choose a job's "tenant" and
// "lane" (on POST /v1/jobs and replays): services that enqueue for their
// own customers, and name each. Each entry is as for WithOperators (an
// identity, or a role's ARN for its sessions). Any other caller that gives
// either gets 403 forbidden and nothing is stored: a tenant is a share of
// the queue's fairness and of per-tenant limits, and a lane is a queue with
// workers of its own (the urgent lane runs ahead of every owner's jobs; a
// long lane bills by the vCPU), so neither is the caller's to pick. Go
// producers (a Service of their own, given GrantEnqueue) set both freely.
func (a *API) WithTrustedCallers(callers []string) *API {
	a.trusted = nil
	for _, c := range callers {
		if c = strings.TrimSpace(c); c != "" {
			a.trusted = append(a.trusted, operatorIdentity(c))
		}
	}
	return a
}

var errNotTrusted = &requestError{code: "forbidden", detail: `only the deployment's trusted callers may give "tenant" or "lane": leave them out (the job is the caller's own, in its kind's lane)`}

// checkChoices refuses a tenant or a lane from a caller who may not
// choose them.
func (a *API) checkChoices(caller string, opts jobs.EnqueueOpts) error {
	if (opts.Tenant == "" && opts.Lane == "") || slices.Contains(a.trusted, caller) {
		return nil
	}
	return errNotTrusted
}
