package localstack

import "github.com/lambdajobs/lambdajobs/internal/dashboard"

// DashboardConfig is the configuration Stack.Dashboard uses, for a test to
// change before dashboard.New (to count the dashboard's API calls through
// Do, say).
func (s *Stack) DashboardConfig(caller, addr string) (dashboard.Config, error) {
	return s.dashboardConfig(caller, addr)
}
