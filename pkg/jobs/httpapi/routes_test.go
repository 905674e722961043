package httpapi

import (
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// Every route of the deployment's descriptor has a handler here, and every
// handler serves a route of it: a route added to or removed from
// deploy.Routes without its handler fails here.
func TestEveryRouteOfTheDescriptorIsServed(t *testing.T) {
	a := &API{}
	ids := map[string]bool{}
	for _, rt := range deploy.Routes {
		ids[rt.ID] = true
		switch {
		case rt.Function == deploy.Schedules:
			if !scheduleRoutes[rt.ID] {
				t.Errorf("%s (%s): the schedules handler does not serve it", rt.ID, rt.Key())
			}
		case a.handler(rt.ID) == nil:
			t.Errorf("%s (%s): no handler", rt.ID, rt.Key())
		}
	}
	for id := range a.handlers() {
		if !ids[id] {
			t.Errorf("API serves %s, which the descriptor does not have", id)
		}
	}
	for id := range scheduleRoutes {
		if !ids[id] {
			t.Errorf("Schedules serves %s, which the descriptor does not have", id)
		}
	}
}
