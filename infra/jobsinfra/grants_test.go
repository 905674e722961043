package jobsinfra

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// roleCase is a role whose policies the construct derives from the
// descriptor: which of deploy.Grants it has, its lane, and its function's
// log group (its logical id; "" for a role without one of the construct's).
type roleCase struct {
	id, role, lane, logs string
	// tracing: Lambda's active tracing grants its function X-Ray.
	tracing bool
}

// descriptorStack is a synthesized stack with what the test needs to
// resolve the descriptor's resources in its template.
type descriptorStack struct {
	name  string
	stack awscdk.Stack
	jobs  *Jobs
	t     *cfnTemplate
}

func (d *descriptorStack) id(c constructs.IConstruct) string {
	return *d.stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// roles are the stack's roles whose policies come from the descriptor:
// each function's (every lane's worker), Scheduler's, and those given
// GrantEnqueue (a team's "Orders" function) and GrantReadJobs ("Reader").
func (d *descriptorStack) roles() []roleCase {
	j := d.jobs
	var out []roleCase
	for _, name := range FunctionNames {
		if name == deploy.Worker {
			continue
		}
		f := j.Functions[name]
		out = append(out, roleCase{id: d.id(f.Role()), role: name, logs: d.id(f.LogGroup()), tracing: j.cfg.Tracing})
	}
	for _, lane := range j.laneOrder {
		w := j.Lanes[lane].Worker
		out = append(out, roleCase{id: d.id(w.Role()), role: deploy.Worker, lane: lane, logs: d.id(w.LogGroup()), tracing: j.cfg.Tracing})
	}
	out = append(out, roleCase{id: d.id(j.SchedulerRole), role: deploy.Scheduler})
	for id, r := range d.t.resources {
		switch {
		case r.Type == "AWS::IAM::Role" && strings.HasPrefix(id, "OrdersServiceRole"):
			out = append(out, roleCase{id: id, role: deploy.Enqueue})
		case r.Type == "AWS::IAM::Role" && strings.HasPrefix(id, "Reader"):
			out = append(out, roleCase{id: id, role: deploy.Reader})
		}
	}
	return out
}

// arns are the ARNs the template gives a descriptor resource, for rc.
func (d *descriptorStack) arns(t *testing.T, r deploy.Resource, rc roleCase) []string {
	t.Helper()
	j, tm := d.jobs, d.t
	att := func(c constructs.IConstruct) string {
		s, err := tm.getAtt(d.id(c), "Arn")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if name, ok := r.IndexName(); ok {
		return []string{att(j.Table) + "/index/" + name}
	}
	var out []string
	switch r {
	case deploy.Table:
		out = append(out, att(j.Table))
	case deploy.Queues:
		for _, lane := range j.laneOrder {
			out = append(out, att(j.Lanes[lane].Queue))
		}
	case deploy.DefaultQueue:
		out = append(out, att(j.Queue))
	case deploy.OwnQueue:
		out = append(out, att(j.Lanes[rc.lane].Queue))
	case deploy.DLQs:
		for _, lane := range j.laneOrder {
			out = append(out, att(j.Lanes[lane].DLQ))
		}
	case deploy.ScheduleDLQ:
		out = append(out, att(j.ScheduleDLQ))
	case deploy.Bus:
		out = append(out, att(j.EventBus))
	case deploy.RuntimeSchedules:
		out = append(out, tm.arn("scheduler", "schedule/"+j.Names.RuntimeScheduleGroup+"/*"))
	case deploy.SchedulerRole:
		out = append(out, att(j.SchedulerRole))
	case deploy.PayloadSecret, deploy.PageSecret:
		secret := j.payloadSecret
		if r == deploy.PageSecret {
			secret = j.pageSecret
		}
		s, err := tm.ref(d.id(secret))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	case deploy.Key:
		if j.Key != nil {
			out = append(out, att(j.Key))
		}
	case deploy.Bucket:
		if j.Parts != nil {
			out = append(out, att(j.Parts))
		}
	case deploy.Parts:
		if j.Parts != nil {
			out = append(out, att(j.Parts)+"/parts/*")
		}
	case deploy.Uploads:
		if j.Parts != nil {
			out = append(out, att(j.Parts)+"/uploads/*")
		}
	case deploy.OwnLogs:
		if rc.logs != "" {
			s, err := tm.getAtt(rc.logs, "Arn")
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s+":*")
		}
	case deploy.Anything:
		if rc.tracing {
			out = append(out, "*")
		}
	default:
		t.Fatalf("resource %q is not modelled by the test", r)
	}
	return out
}

// condition is the condition a descriptor condition becomes, as JSON.
func (d *descriptorStack) condition(c deploy.Condition) string {
	eq := map[string]string{}
	if c.Via != "" {
		eq["kms:ViaService"] = c.Via + "." + testRegion + ".amazonaws.com"
		eq["kms:CallerAccount"] = testAccount
	}
	if c.PassedTo != "" {
		eq["iam:PassedToService"] = c.PassedTo
	}
	if len(eq) == 0 {
		return "null"
	}
	return jsonString(map[string]any{"StringEquals": eq})
}

// Every statement of every role the construct derives (each function's,
// every lane's worker's, Scheduler's, and those GrantEnqueue and
// GrantReadJobs give) is one of the descriptor's triples for that role
// (internal/deploy), and every triple the deployment has a resource for is
// there, those CDK adds itself (the event source's, tracing's) included:
// an action written anywhere but the descriptor fails here.
func TestRolePoliciesAreTheDescriptors(t *testing.T) {
	var stacks []*descriptorStack
	for name, e := range environments(t) {
		tm, err := newTemplate(e.template, testAccount, testRegion)
		if err != nil {
			t.Fatal(err)
		}
		stacks = append(stacks, &descriptorStack{name: name, stack: e.stack, jobs: e.jobs, t: tm})
	}
	l := synthLanes(t)
	stacks = append(stacks, &descriptorStack{name: "lanes", stack: l.stack, jobs: l.jobs, t: l.t})
	for _, d := range stacks {
		for _, rc := range d.roles() {
			want := map[string]bool{}
			for _, g := range deploy.Grants(rc.role) {
				if g.Resource == deploy.Anything && g.By != deploy.ByTracing {
					t.Fatalf("%s: %v on * not by tracing", rc.role, g.Actions)
				}
				if g.Resource == deploy.Key && g.Condition.Via == "s3" && d.jobs.Parts == nil {
					continue // the key through S3 comes with the bucket
				}
				for _, arn := range d.arns(t, g.Resource, rc) {
					for _, a := range g.Actions {
						want[a+" "+arn+" "+d.condition(g.Condition)] = true
					}
				}
			}
			docs, err := d.t.identityPolicies(rc.id)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, doc := range docs {
				for _, st := range asList(doc["Statement"]) {
					m := st.(map[string]any)
					if m["Effect"] != "Allow" {
						t.Errorf("%s %s: a %v statement", d.name, rc.id, m["Effect"])
					}
					cond, _ := json.Marshal(m["Condition"])
					for _, a := range asList(m["Action"]) {
						for _, r := range asList(m["Resource"]) {
							got[a.(string)+" "+r.(string)+" "+string(cond)] = true
						}
					}
				}
			}
			for k := range got {
				if !want[k] {
					t.Errorf("%s: role %s (%s, lane %q) allows %s: not among its grants in internal/deploy", d.name, rc.id, rc.role, rc.lane, k)
				}
			}
			for k := range want {
				if !got[k] {
					t.Errorf("%s: role %s (%s, lane %q) lacks %s, which internal/deploy grants it", d.name, rc.id, rc.role, rc.lane, k)
				}
			}
		}
	}
}

// iamAction is a string literal that reads as an IAM action.
var iamAction = regexp.MustCompile(`^[a-z][a-z0-9-]*:[A-Z][A-Za-z]*\*?$`)

// No IAM action is written in the construct's code but in grants.go (which
// maps the descriptor's resources, and names the resource policies' lists)
// and the policies that are no role's of the deployment: resource policies
// (a statement with Principals), the key policy's actions, the API's
// execute-api grants (GrantInvoke, GrantOperate), and the custom resource
// that sets the DLQs' RedriveAllowPolicy at deployment. Condition keys (a
// map's keys) are not actions.
func TestRoleActionsAreWrittenOnlyInTheDescriptor(t *testing.T) {
	allowedIn := map[string]bool{"keyCryptoActions": true, "grantRoutes": true, "redriveOnlyFrom": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "grants.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, decl := range f.Decls {
			if allowedIn[declName(decl)] {
				continue
			}
			var stack []ast.Node
			ast.Inspect(decl, func(n ast.Node) bool {
				if n == nil {
					stack = stack[:len(stack)-1]
					return true
				}
				stack = append(stack, n)
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil || !iamAction.MatchString(s) || isMapKey(stack) || inResourcePolicy(stack) {
					return true
				}
				t.Errorf("%s: IAM action %q written in %s: a role's actions come from internal/deploy (grants.go maps them)", fset.Position(lit.Pos()), s, declName(decl))
				return true
			})
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files of the construct", checked)
	}
}

// declName is a function's (or a var's first) name.
func declName(d ast.Decl) string {
	switch x := d.(type) {
	case *ast.FuncDecl:
		return x.Name.Name
	case *ast.GenDecl:
		for _, s := range x.Specs {
			if v, ok := s.(*ast.ValueSpec); ok && len(v.Names) > 0 {
				return v.Names[0].Name
			}
		}
	}
	return ""
}

// isMapKey reports whether the node atop stack is a key of a key-value
// pair (a condition key such as "kms:ViaService").
func isMapKey(stack []ast.Node) bool {
	if len(stack) < 2 {
		return false
	}
	kv, ok := stack[len(stack)-2].(*ast.KeyValueExpr)
	return ok && kv.Key == stack[len(stack)-1]
}

// inResourcePolicy reports whether the node atop stack is inside a
// composite literal with a Principals field: a resource policy's
// statement.
func inResourcePolicy(stack []ast.Node) bool {
	return slices.ContainsFunc(stack, func(n ast.Node) bool {
		cl, ok := n.(*ast.CompositeLit)
		if !ok {
			return false
		}
		return slices.ContainsFunc(cl.Elts, func(e ast.Expr) bool {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				return false
			}
			id, ok := kv.Key.(*ast.Ident)
			return ok && id.Name == "Principals"
		})
	})
}
