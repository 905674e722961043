package jobsinfra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// api creates the HTTP API: IAM (or JWT) authorisation on every route,
// each route served by its function (routes), and its stage.
func (s *Jobs) api() {
	cfg := s.cfg
	var authorizer awsapigatewayv2.IHttpRouteAuthorizer = awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	if cfg.JWT != nil {
		authorizer = awsapigatewayv2authorizers.NewHttpJwtAuthorizer(jsii.String("Jwt"), jsii.String(cfg.JWT.Issuer),
			&awsapigatewayv2authorizers.HttpJwtAuthorizerProps{JwtAudience: jsii.Strings(cfg.JWT.Audience...)})
	}
	props := &awsapigatewayv2.HttpApiProps{}
	if c := cfg.CORS; c != nil {
		props.CorsPreflight = &awsapigatewayv2.CorsPreflightOptions{
			AllowOrigins: jsii.Strings(c.AllowOrigins...),
			AllowMethods: &[]awsapigatewayv2.CorsHttpMethod{awsapigatewayv2.CorsHttpMethod_GET, awsapigatewayv2.CorsHttpMethod_POST, awsapigatewayv2.CorsHttpMethod_DELETE},
			AllowHeaders: jsii.Strings("content-type", "idempotency-key", "authorization", "if-none-match"),
			// A job's version, which a browser's waits send back.
			ExposeHeaders: jsii.Strings("etag"),
			MaxAge:        awscdk.Duration_Hours(jsii.Number(1)),
		}
	}
	fix := func() { props.ApiName, props.CreateDefaultStage = jsii.String(s.Names.API), jsii.Bool(false) }
	fix()
	s.overrides.api(props)
	fix()
	s.API = awsapigatewayv2.NewHttpApi(s.Construct, jsii.String("Api"), props)
	// The routes, in one table: each with its function and, behind a JWT
	// authorizer, the scopes Config.JWT asks of it.
	for _, r := range routes {
		opts := &awsapigatewayv2.AddRoutesOptions{
			Path: jsii.String(r.Path), Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
			Integration: awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(r.ID), s.Functions[r.Function], nil),
			Authorizer:  authorizer,
		}
		if r.Auth == deploy.AuthNone {
			// Its request carries its authority (a callback token, which
			// the function checks before it reads anything).
			opts.Authorizer = awsapigatewayv2.NewHttpNoneAuthorizer()
		} else if cfg.JWT != nil {
			if scopes := cfg.JWT.scopesOf(r); len(scopes) > 0 {
				opts.AuthorizationScopes = jsii.Strings(scopes...)
			}
		}
		added := s.API.AddRoutes(opts)
		if r.Auth == deploy.AuthNone {
			for _, route := range *added {
				cdknag.NagSuppressions_AddResourceSuppressions(route, &[]*cdknag.NagPackSuppression{{
					Id: jsii.String("AwsSolutions-APIG4"),
					Reason: jsii.String("The callback route is for third parties without AWS credentials (a payment provider's webhook): its request carries its " +
						"authority, a callback token sealed under the payload key ring, which the function opens before it reads anything; the route " +
						"has a throttle of its own, and its access log keeps the route key, never the token in the path."),
				}}, jsii.Bool(true))
			}
		}
	}
	s.apiStage()
}

// apiStage is the API's one stage: access logs, throttling, and the
// tighter throttle of the routes that write many jobs.
func (s *Jobs) apiStage() {
	cfg := s.cfg
	accessLogs := s.logGroup("api-access", "ApiAccessLogs")
	stage := awsapigatewayv2.NewHttpStage(s.Construct, jsii.String("DefaultStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    s.API,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle:   &awsapigatewayv2.ThrottleSettings{RateLimit: jsii.Number(cfg.ThrottleRate), BurstLimit: jsii.Number(float64(cfg.ThrottleBurst))},
		AccessLogSettings: &accessLogSettings{
			destination: awsapigatewayv2.NewLogGroupLogDestination(accessLogs),
			format:      awsapigateway.AccessLogFormat_Custom(jsii.String(AccessLogFormat)),
		},
	})
	// Creating a batch writes up to 1,000 jobs: its own, tighter throttle.
	stage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetRouteSettings(map[string]any{
		"POST /v1/batches": map[string]any{
			"ThrottlingRateLimit":  cfg.BatchThrottleRate,
			"ThrottlingBurstLimit": cfg.BatchThrottleBurst,
		},
		// A bulk action changes up to 100 jobs.
		"POST /v1/bulk/{action}": map[string]any{
			"ThrottlingRateLimit":  cfg.BatchThrottleRate,
			"ThrottlingBurstLimit": cfg.BatchThrottleBurst,
		},
		// Anyone may call the callback route: a throttle of its own.
		callbackRoute.Key(): map[string]any{
			"ThrottlingRateLimit":  cfg.CallbackThrottleRate,
			"ThrottlingBurstLimit": cfg.CallbackThrottleBurst,
		},
	})
}

// callbackRoute is the route without auth (deploy.AuthNone).
var callbackRoute, _ = deploy.RouteByID(deploy.RouteCallback)

// AccessLogFormat is the API's access log line: one JSON object per request,
// with the caller, the route, the status, the latencies and the errors of the
// authorizer and the integration.
const AccessLogFormat = `{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","caller":"$context.identity.caller",` +
	`"user":"$context.identity.userArn","requestTime":"$context.requestTime","routeKey":"$context.routeKey",` +
	`"status":"$context.status","responseLength":"$context.responseLength","latency":"$context.responseLatency",` +
	`"integrationLatency":"$context.integrationLatency","integrationStatus":"$context.integrationStatus",` +
	`"integrationError":"$context.integrationErrorMessage","error":"$context.error.message",` +
	`"authorizerError":"$context.authorizer.error"}`

// accessLogSettings is the stage's access log configuration (an
// awsapigatewayv2.IAccessLogSettings).
type accessLogSettings struct {
	destination awsapigatewayv2.IAccessLogDestination
	format      awsapigateway.AccessLogFormat
}

func (a *accessLogSettings) Destination() awsapigatewayv2.IAccessLogDestination { return a.destination }
func (a *accessLogSettings) Format() awsapigateway.AccessLogFormat              { return a.format }

// scopesOf are the scopes route r asks of a token: its own (Scopes), or
// for the wait route, which reads what GET /v1/jobs/{id} reads, that
// route's unless it has its own: a deployment that guards the read does
// not leave the wait open.
func (j *JWTConfig) scopesOf(r deploy.Route) []string {
	if scopes := j.Scopes[r.Key()]; len(scopes) > 0 || r.ID != deploy.RouteWaitJob {
		return scopes
	}
	get, _ := deploy.RouteByID(deploy.RouteGetJob)
	return j.Scopes[get.Key()]
}
