package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
)

// The Pauses page lists the pauses in force (GET /v1/pauses: those that
// hold the caller's jobs; an operator's GET /v1/admin/pauses: every one)
// and pauses and resumes through the same routes as ljob pause and
// resume. The caller pauses its own jobs of a kind; an operator, every
// owner's jobs of a kind, one owner's, or a lane.

// pauseFor is a choice of the pause form's "for": how long a pause lasts
// unless resumed sooner, in seconds (0: the longest, jobs.MaxPause).
type pauseFor struct {
	Label   string
	Seconds int64
}

// pauseFors are the pause form's choices.
var pauseFors = []pauseFor{
	{"until resumed (13 days at most)", 0},
	{"15 minutes", 15 * 60},
	{"1 hour", 60 * 60},
	{"4 hours", 4 * 60 * 60},
	{"1 day", 24 * 60 * 60},
	{"7 days", 7 * 24 * 60 * 60},
}

// pausesData is the Pauses page: the pauses in force, and what the pause
// form offers (the kinds, and for an operator the lanes).
type pausesData struct {
	Operator bool
	Pauses   []jobs.PauseInfo
	ListErr  string
	Kinds    []string
	Lanes    []string // an operator's: driver.DefaultLaneName and each other lane
	KindsErr string
	For      []pauseFor
}

func (s *Server) pauses(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := pausesData{Operator: s.cfg.Operator, For: pauseFors}
	route := deploy.RouteListPauses
	if s.cfg.Operator {
		route = deploy.RouteAdminListPauses
	}
	var list httpapi.PauseList
	switch status, problem, err := s.call(ctx, apiclient.Request{Route: route}, &list); {
	case err != nil:
		d.ListErr = err.Error()
	case status != http.StatusOK:
		d.ListErr = problem
	default:
		d.Pauses = list.Pauses
	}
	var kinds httpapi.KindList
	switch status, problem, err := s.call(ctx, apiclient.Request{Route: deploy.RouteListKinds}, &kinds); {
	case err != nil:
		d.KindsErr = err.Error()
	case status != http.StatusOK:
		d.KindsErr = problem
	default:
		lanes := []string{driver.DefaultLaneName}
		for _, k := range kinds.Kinds {
			d.Kinds = append(d.Kinds, k.Name)
			if k.Lane != "" && !slices.Contains(lanes, k.Lane) {
				lanes = append(lanes, k.Lane)
			}
		}
		slices.Sort(lanes[1:])
		if s.cfg.Operator {
			d.Lanes = lanes
		}
	}
	s.render(w, "pauses.html", http.StatusOK, page{Title: "Pauses", Nav: "pauses", Flash: flashOf(r.URL.Query()), Data: d})
}

// pauseTarget is the body of a pause or resume naming what the form
// names: a kind, or for an operator a lane, or one owner's jobs of a kind
// (the API refuses any other combination). The caller's own route names
// its jobs of a kind only: the API takes the owner from its identity.
func (s *Server) pauseTarget(form url.Values) map[string]any {
	fields := []string{"kind"}
	if s.cfg.Operator {
		fields = append(fields, "lane", "owner")
	}
	body := map[string]any{}
	for _, k := range fields {
		if v := form.Get(k); v != "" {
			body[k] = v
		}
	}
	return body
}

// pause pauses what the form names (POST /v1/pauses, an operator's POST
// /v1/admin/pauses) for the form's "for" seconds ("" the longest), and
// shows the pauses in force.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	if r.ParseForm() != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	body := s.pauseTarget(r.PostForm)
	if f := r.PostForm.Get("for"); f != "" && f != "0" {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		body["for"] = n
	}
	route := deploy.RoutePause
	if s.cfg.Operator {
		route = deploy.RouteAdminPause
	}
	status, problem, err := s.call(r.Context(), apiclient.Request{Route: route, Body: body}, nil)
	switch {
	case err != nil:
		s.fail(w, "pauses", err)
	case status >= 300:
		s.refused(w, status, page{Title: "Not paused", Nav: "pauses", Problem: "Not done: " + problem, Back: "/pauses"})
	default:
		redirect(w, r, "/pauses", "paused")
	}
}

// resume ends the pause the form names (POST /v1/pauses/resume, an
// operator's POST /v1/admin/pauses/resume). An operator's pause of one
// owner's jobs is listed with the owner's key only, a hash: its form asks
// for the owner, and the owner given must have that key (owner_key),
// lest a mistyped owner end another owner's pause of the kind.
func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	if r.ParseForm() != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if key := r.PostForm.Get("owner_key"); s.cfg.Operator && key != "" && wire.OwnerKey(r.PostForm.Get("owner")) != key {
		redirect(w, r, "/pauses", "resume_other_owner")
		return
	}
	route := deploy.RouteResume
	if s.cfg.Operator {
		route = deploy.RouteAdminResume
	}
	status, problem, err := s.call(r.Context(), apiclient.Request{Route: route, Body: s.pauseTarget(r.PostForm)}, nil)
	switch {
	case err != nil:
		s.fail(w, "pauses", err)
	case status >= 300:
		s.refused(w, status, page{Title: "Not resumed", Nav: "pauses", Problem: "Not done: " + problem, Back: "/pauses"})
	default:
		redirect(w, r, "/pauses", "resumed")
	}
}
