package localstack

import "github.com/lambdajobs/lambdajobs/internal/dashboard"

// DashboardConfig is the configuration Stack.Dashboard uses, for a test to
// change before dashboard.New (to count the dashboard's API calls through
// Do, say).
func (s *Stack) DashboardConfig(caller, addr string) (dashboard.Config, error) {
	return s.dashboardConfig(caller, addr)
}

// WebhookBacklog is how many events a Webhook holds before it drops one.
const WebhookBacklog = webhookBacklog

// LoopbackOnly is the check of every address a Webhook dials.
var LoopbackOnly = loopbackOnly

// OwnHostOnly is the Host check in front of the local stack's API.
var OwnHostOnly = ownHostOnly
