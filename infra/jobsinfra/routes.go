package jobsinfra

import "github.com/lambdajobs/lambdajobs/internal/deploy"

// routes are the API's routes, as the deployment's descriptor lists them
// (the table httpapi dispatches on and the local gateway serves): the
// construct creates them, grants them (GrantInvoke, GrantOperate) and lists
// them in RouteKeys.
var routes = deploy.Routes

// RouteKeys are the API's routes, as JWTConfig.Scopes names them.
var RouteKeys = deploy.RouteKeys()
