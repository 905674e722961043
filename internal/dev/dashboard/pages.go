package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
)

// kindRow is one kind's counts on the overview.
type kindRow struct {
	Kind                                                               string
	Enqueued, Started, Succeeded, Failed, Retried, Cancelled, TimedOut float64
	RunP50, RunP99, QueueP50, QueueP99                                 float64
	PerMinute                                                          float64 // runs ended per minute, last 5 minutes
}

type overviewData struct {
	// Now: the caller's queued and running jobs by kind (GET /v1/counts;
	// not for an operator, who reads one owner at a time).
	ShowNow      bool
	Now          []nowRow
	NowTruncated bool
	NowErr       string
	// Limits: every kind's lane, limits and caps (GET /v1/kinds), with
	// how many of the caller's jobs wait on them (GET /v1/counts), and a
	// Pause button each (the caller's jobs of it; an operator's: every
	// owner's).
	Operator       bool
	Limits         []limitRow
	LimitsErr      string
	Kinds          []kindRow
	HasStats       bool
	HasQueues      bool
	Queue, DLQ     int
	Lanes          map[string]int // each other lane's queue depth
	QueueErr       string
	Failed, Queued int
}

// nowRow is one kind's unfinished jobs on the overview.
type nowRow struct {
	Kind                     string
	Queued, Waiting, Running int
}

// limitRow is one kind's lane, limits and caps on the overview, and how
// many of the caller's jobs wait ("-" for an operator, who reads one
// owner at a time).
type limitRow struct {
	jobs.KindInfo
	Waiting string
}

// Rate is a rate limit as the overview shows it ("" for none).
func (r limitRow) Rate(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d per %gs", n, r.RatePeriod)
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := overviewData{Operator: s.cfg.Operator}
	var now jobs.UnfinishedCounts
	if d.ShowNow = !s.cfg.Operator; d.ShowNow {
		switch status, problem, err := s.call(ctx, apiclient.Request{Route: deploy.RouteCounts}, &now); {
		case err != nil:
			d.NowErr = err.Error()
		case status != http.StatusOK:
			d.NowErr = problem
		default:
			for k, c := range now.Kinds {
				d.Now = append(d.Now, nowRow{Kind: k, Queued: c.Queued, Waiting: c.Waiting, Running: c.Running})
			}
			sort.Slice(d.Now, func(i, j int) bool { return d.Now[i].Kind < d.Now[j].Kind })
			d.NowTruncated = now.Truncated
		}
	}
	var kinds httpapi.KindList
	switch status, problem, err := s.call(ctx, apiclient.Request{Route: deploy.RouteListKinds}, &kinds); {
	case err != nil:
		d.LimitsErr = err.Error()
	case status != http.StatusOK:
		d.LimitsErr = problem
	default:
		for _, k := range kinds.Kinds {
			row := limitRow{KindInfo: k, Waiting: "-"}
			if d.ShowNow && d.NowErr == "" {
				row.Waiting = fmt.Sprint(now.Kinds[k.Name].Waiting)
			}
			d.Limits = append(d.Limits, row)
		}
	}
	if s.cfg.Stats != nil {
		if rows, err := s.stats(ctx); err == nil {
			d.Kinds, d.HasStats = rows, true
		}
	}
	if s.cfg.DLQ != nil {
		depths, err := s.cfg.DLQ.Depths(ctx)
		d.HasQueues, d.Queue, d.DLQ, d.Lanes = true, depths.Queue, depths.DeadLetters, depths.Lanes
		if err != nil {
			d.QueueErr = err.Error()
		}
	}
	s.render(w, "overview.html", http.StatusOK, page{Title: "Overview", Nav: "overview", Flash: flashOf(r.URL.Query()), Data: d})
}

// stats reads the local stack's per-kind metrics (counts never come from
// counting items).
func (s *Server) stats(ctx context.Context) ([]kindRow, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.Stats.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.cfg.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Kinds map[string]struct {
			Counts    map[string]float64 `json:"counts"`
			Durations map[string]struct {
				P50 float64 `json:"p50"`
				P99 float64 `json:"p99"`
			} `json:"durations_ms"`
			PerMinute float64 `json:"ended_per_minute"`
		} `json:"kinds"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	var rows []kindRow
	for k, v := range out.Kinds {
		c := v.Counts
		rows = append(rows, kindRow{Kind: k, Enqueued: c[metricnames.JobsEnqueued], Started: c[metricnames.JobsStarted], Succeeded: c[metricnames.JobsSucceeded],
			Failed: c[metricnames.JobsFailed], Retried: c[metricnames.JobsRetried], Cancelled: c[metricnames.JobsCancelled], TimedOut: c[metricnames.JobsTimedOut],
			RunP50: v.Durations[metricnames.RunDuration].P50, RunP99: v.Durations[metricnames.RunDuration].P99,
			QueueP50: v.Durations[metricnames.QueueLatency].P50, QueueP99: v.Durations[metricnames.QueueLatency].P99, PerMinute: v.PerMinute})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Kind < rows[j].Kind })
	return rows, nil
}

type listData struct {
	Operator  bool
	Owner     string
	Jobs      []jobs.View
	Status    string
	Kind      string
	Tag       string // "key=value", the one tag to filter by
	Limit     int
	Next      string
	Statuses  []string
	Query     string // the filter, for the live refresh and bulk forms
	ThisPage  string
	PageToken string
}

func (s *Server) jobList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := listData{Status: q.Get("status"), Kind: q.Get("kind"), Tag: q.Get("tag"), Limit: atoiOr(q.Get("limit"), 25), PageToken: q.Get("page_token"),
		Statuses: []string{"queued", "running", "succeeded", "failed", "cancelled"}, Operator: s.cfg.Operator, Owner: q.Get("owner")}
	api := url.Values{"limit": {fmt.Sprint(d.Limit)}}
	filter := url.Values{}
	listRoute := deploy.RouteListJobs
	if s.cfg.Operator {
		listRoute = deploy.RouteAdminListJobs
		if d.Owner == "" {
			s.render(w, "jobs.html", http.StatusOK, page{Title: "Jobs", Nav: "jobs", Flash: "Give the owner whose jobs to see (an operator sees one owner at a time).", Data: d})
			return
		}
	}
	for k, v := range map[string]string{"status": d.Status, "kind": d.Kind, "tag": d.Tag, "owner": d.Owner} {
		if v != "" {
			api.Set(k, v)
			filter.Set(k, v)
		}
	}
	if d.PageToken != "" {
		api.Set("page_token", d.PageToken)
	}
	var list httpapi.JobList
	status, problem, err := s.call(r.Context(), apiclient.Request{Route: listRoute, Query: api}, &list)
	if err != nil {
		s.fail(w, "jobs", err)
		return
	}
	d.Jobs, d.Query, d.ThisPage = list.Jobs, filter.Encode(), r.URL.RequestURI()
	if list.NextPageToken != nil {
		next := url.Values{"limit": {fmt.Sprint(d.Limit)}, "page_token": {*list.NextPageToken}}
		for k := range filter {
			next.Set(k, filter.Get(k))
		}
		d.Next = "/jobs?" + next.Encode()
	}
	p := page{Title: "Jobs", Nav: "jobs", Flash: flashOf(q), Problem: problem, Data: d}
	if q.Get("partial") == "rows" {
		s.render(w, "rows.html", http.StatusOK, p)
		return
	}
	if status >= 300 {
		s.render(w, "jobs.html", status, p)
		return
	}
	s.render(w, "jobs.html", http.StatusOK, p)
}

// jobRequest is a request of a job's route: the caller's, or for an
// operator the admin one (action "": the job itself).
func (s *Server) jobRequest(id, action string) apiclient.Request {
	if s.cfg.Operator {
		if action == "" {
			return apiclient.Request{Route: deploy.RouteAdminGetJob, Params: map[string]string{"id": id}}
		}
		return apiclient.Request{Route: deploy.RouteAdminJobAction, Params: map[string]string{"id": id, "action": action}}
	}
	route := map[string]string{"": deploy.RouteGetJob, "cancel": deploy.RouteCancelJob, "retry": deploy.RouteRetryJob}[action]
	return apiclient.Request{Route: route, Params: map[string]string{"id": id}}
}

// jobData is a job's page: the job, and for an operator its owner.
type jobData struct {
	jobs.View
	Owner string
}

func (s *Server) getJob(ctx context.Context, id string) (jobData, int, string, error) {
	if s.cfg.Operator {
		var a httpapi.AdminJob
		status, problem, err := s.call(ctx, s.jobRequest(id, ""), &a)
		return jobData{View: a.Job, Owner: a.Owner}, status, problem, err
	}
	var v jobs.View
	status, problem, err := s.call(ctx, s.jobRequest(id, ""), &v)
	return jobData{View: v}, status, problem, err
}

func (s *Server) jobDetail(w http.ResponseWriter, r *http.Request) {
	v, status, problem, err := s.getJob(r.Context(), r.PathValue("id"))
	if err != nil {
		s.fail(w, "jobs", err)
		return
	}
	if status >= 300 {
		s.render(w, "problem.html", status, page{Title: "No such job", Nav: "jobs", Problem: problem})
		return
	}
	s.render(w, "job.html", http.StatusOK, page{Title: "Job " + v.ID, Nav: "jobs", Flash: flashOf(r.URL.Query()), Data: v})
}

// jobJSON is the job for the detail page's live updates: with the
// version the page last saw (If-None-Match), a caller's is a wait for its
// next change (GET /v1/jobs/{id}/wait), or a read when the wait is
// refused; an operator's is a read (the admin routes have no wait).
func (s *Server) jobJSON(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var v jobs.View
	etag := ""
	c := &apiclient.Client{Base: s.cfg.API, Do: s.cfg.Do, Caller: s.cfg.Caller}
	params := map[string]string{"id": id}
	if seen := r.Header.Get("If-None-Match"); seen != "" && !s.cfg.Operator {
		q := url.Values{"timeout": {strconv.Itoa(int(pageWait / time.Second))}}
		if resp, err := c.Call(r.Context(), apiclient.Request{Route: deploy.RouteWaitJob, Params: params, Query: q, Header: map[string]string{"If-None-Match": seen}}, &v); err == nil {
			etag = resp.Header.Get("ETag")
		}
	}
	if etag == "" && !s.cfg.Operator {
		resp, err := c.Call(r.Context(), apiclient.Request{Route: deploy.RouteGetJob, Params: params}, &v)
		if err != nil {
			http.Error(w, "unavailable", http.StatusBadGateway)
			return
		}
		etag = resp.Header.Get("ETag")
	}
	if s.cfg.Operator {
		d, status, _, err := s.getJob(r.Context(), id)
		if err != nil || status >= 300 {
			http.Error(w, "unavailable", http.StatusBadGateway)
			return
		}
		v = d.View
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) jobAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		back := "/jobs/" + url.PathEscape(id)
		var v jobs.View
		status, problem, err := s.call(r.Context(), s.jobRequest(id, action), &v)
		switch {
		case err != nil:
			s.fail(w, "jobs", err)
		case status >= 300:
			s.refused(w, status, page{Nav: "jobs", Problem: "Not done: " + problem, Back: back})
		case action == "cancel" && v.Status == jobs.StatusRunning:
			redirect(w, r, back, "cancel_requested")
		case action == "cancel":
			redirect(w, r, back, "cancelled")
		default:
			redirect(w, r, back, "retried")
		}
	}
}

// replay enqueues a new job from the job (POST /v1/jobs/{id}/replay),
// with the form's payload when it gives one, and shows the new job. Not
// for operators: the new job would be theirs, not its owner's.
func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if s.cfg.Operator || r.ParseForm() != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var body any
	if p := strings.TrimSpace(r.PostForm.Get("payload")); p != "" {
		if !json.Valid([]byte(p)) {
			redirect(w, r, "/jobs/"+url.PathEscape(id), "payload_not_json")
			return
		}
		body = map[string]json.RawMessage{"payload": json.RawMessage(p)}
	}
	var v jobs.View
	status, problem, err := s.call(r.Context(), apiclient.Request{Route: deploy.RouteReplayJob, Params: map[string]string{"id": id}, Body: body}, &v)
	switch {
	case err != nil:
		s.fail(w, "jobs", err)
	case status >= 300:
		s.refused(w, status, page{Nav: "jobs", Problem: "Not done: " + problem, Back: "/jobs/" + url.PathEscape(id)})
	default:
		redirect(w, r, "/jobs/"+url.PathEscape(v.ID), "replayed")
	}
}

// signal delivers the form's signal (its name and JSON payload) to the
// job: the caller's route, or for an operator the admin one.
func (s *Server) signal(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if r.ParseForm() != nil || r.PostForm.Get("name") == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	back := "/jobs/" + url.PathEscape(id)
	payload := strings.TrimSpace(r.PostForm.Get("payload"))
	if !json.Valid([]byte(payload)) {
		redirect(w, r, back, "payload_not_json")
		return
	}
	route := deploy.RouteSignalJob
	if s.cfg.Operator {
		route = deploy.RouteAdminSignalJob
	}
	var res jobs.SignalResult
	status, problem, err := s.call(r.Context(), apiclient.Request{Route: route, Params: map[string]string{"id": id, "name": r.PostForm.Get("name")},
		Body: json.RawMessage(payload)}, &res)
	switch {
	case err != nil:
		s.fail(w, "jobs", err)
	case status >= 300:
		s.refused(w, status, page{Nav: "jobs", Problem: "Not done: " + problem, Back: back})
	case res.Duplicate:
		redirect(w, r, back, "signal_duplicate")
	case res.Woke:
		redirect(w, r, back, "signalled")
	default:
		redirect(w, r, back, "signal_kept")
	}
}

// bulk runs a bulk action over the whole filter, following continuation
// tokens for up to 20 calls (2,000 jobs) per click.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if action != "cancel" && action != "retry" || s.cfg.Operator || r.ParseForm() != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	body := map[string]string{}
	for _, k := range []string{"status", "kind", "tag"} {
		if v := r.PostForm.Get(k); v != "" {
			body[k] = v
		}
	}
	back := "/jobs?" + r.PostForm.Get("query")
	if len(body) == 0 {
		redirect(w, r, back, "bulk_needs_filter")
		return
	}
	body["created_before"] = time.Now().UTC().Format(time.RFC3339Nano)
	matched, changed := 0, 0
	for range 20 {
		var res httpapi.BulkResult
		status, problem, err := s.call(r.Context(), apiclient.Request{Route: deploy.RouteBulkAction, Params: map[string]string{"action": action}, Body: body}, &res)
		if err != nil {
			s.fail(w, "jobs", err)
			return
		}
		if status >= 300 {
			msg := "Not done: " + problem
			if matched > 0 {
				msg = fmt.Sprintf("%d jobs matched and %d changed, then not done: %s", matched, changed, problem)
			}
			s.refused(w, status, page{Nav: "jobs", Problem: msg, Back: back})
			return
		}
		matched, changed = matched+res.Matched, changed+res.Changed
		if res.ContinuationToken == nil {
			break
		}
		body["continuation_token"] = *res.ContinuationToken
	}
	redirect(w, r, back, map[string]string{"cancel": "bulk_cancelled", "retry": "bulk_retried"}[action], matched, changed)
}

func (s *Server) batchDetail(w http.ResponseWriter, r *http.Request) {
	var b jobs.Batch
	status, problem, err := s.call(r.Context(), apiclient.Request{Route: deploy.RouteGetBatch, Params: map[string]string{"id": r.PathValue("id")}, Query: url.Values{"limit": {"50"}}}, &b)
	if err != nil {
		s.fail(w, "jobs", err)
		return
	}
	if status >= 300 {
		s.render(w, "problem.html", status, page{Title: "No such batch", Nav: "jobs", Problem: problem})
		return
	}
	s.render(w, "batch.html", http.StatusOK, page{Title: "Batch " + b.ID, Nav: "jobs", Data: b})
}

func (s *Server) schedules(w http.ResponseWriter, r *http.Request) {
	var list struct {
		Schedules []httpapi.ScheduleView `json:"schedules"`
	}
	status, problem, err := s.call(r.Context(), apiclient.Request{Route: deploy.RouteListSchedules}, &list)
	if err != nil {
		s.fail(w, "schedules", err)
		return
	}
	if status >= 300 {
		s.render(w, "problem.html", status, page{Title: "Schedules", Nav: "schedules", Problem: problem})
		return
	}
	s.render(w, "schedules.html", http.StatusOK, page{Title: "Schedules", Nav: "schedules", Data: list.Schedules})
}

// dlqData is the dead-letter page: the queues' depths and, after a peek,
// the messages of one lane's dead-letter queue.
type dlqData struct {
	Queue, DLQ int
	Lanes      map[string]int // each other lane's queue depth
	LaneDLQs   map[string]int // each other lane's dead-letter queue depth
	DepthErr   string
	Peeked     bool
	Lane       string // the lane peeked at ("" the default lane)
	Messages   []DeadLetter
}

// hasDLQ answers 404 when the dashboard has no dead-letter queue.
func (s *Server) hasDLQ(w http.ResponseWriter) bool {
	if s.cfg.DLQ == nil {
		s.render(w, "problem.html", http.StatusNotFound, page{Title: "Dead-letter queue", Nav: "dlq",
			Problem: "This dashboard has no access to the dead-letter queue (ljob ui -dlq URL gives it)."})
	}
	return s.cfg.DLQ != nil
}

func (s *Server) depths(ctx context.Context) dlqData {
	depths, err := s.cfg.DLQ.Depths(ctx)
	d := dlqData{Queue: depths.Queue, DLQ: depths.DeadLetters, Lanes: depths.Lanes, LaneDLQs: depths.LaneDeadLetters}
	if err != nil {
		d.DepthErr = err.Error()
	}
	return d
}

// dlq shows the queues' depths only (their attributes): reading the
// messages receives them, which a GET must not do.
func (s *Server) dlq(w http.ResponseWriter, r *http.Request) {
	if !s.hasDLQ(w) {
		return
	}
	s.render(w, "dlq.html", http.StatusOK, page{Title: "Dead-letter queue", Nav: "dlq", Flash: flashOf(r.URL.Query()), Data: s.depths(r.Context())})
}

// dlqPeek shows the dead letters of the lane the form names: Peek
// receives them (their receive counts grow) and releases them at once, so
// it answers a POST, which the cross-origin check guards like every other
// POST.
func (s *Server) dlqPeek(w http.ResponseWriter, r *http.Request) {
	if !s.hasDLQ(w) {
		return
	}
	if r.ParseForm() != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	lane := r.PostForm.Get("lane")
	msgs, err := s.cfg.DLQ.Peek(r.Context(), lane, 50)
	if err != nil {
		s.fail(w, "dlq", err)
		return
	}
	d := s.depths(r.Context())
	d.Peeked, d.Lane, d.Messages = true, lane, msgs
	s.render(w, "dlq.html", http.StatusOK, page{Title: "Dead-letter queue", Nav: "dlq", Data: d})
}

// redrive moves one dead letter (id) or all of a lane's back to the
// lane's queue: job references only, unless the form says shapes=any.
func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	if s.cfg.DLQ == nil || r.ParseForm() != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	lane, anyShape := r.PostForm.Get("lane"), r.PostForm.Get("shapes") == httpapi.RedriveAnyShape
	queue := "the queue"
	if lane != "" {
		queue = "the " + lane + " lane's queue"
	}
	if id := r.PostForm.Get("id"); id != "" {
		if err := s.cfg.DLQ.Redrive(r.Context(), lane, id, anyShape); err != nil {
			s.refused(w, http.StatusBadGateway, page{Title: "Not redriven", Nav: "dlq", Problem: "Message " + id + " was not redriven: " + err.Error(), Back: "/dlq"})
			return
		}
		redirect(w, r, "/dlq", "redriven")
		return
	}
	res, err := s.cfg.DLQ.RedriveAll(r.Context(), lane, anyShape)
	if err != nil {
		s.refused(w, http.StatusBadGateway, page{Title: "Redrive stopped", Nav: "dlq", Problem: fmt.Sprintf("%d messages redriven to %s, then: %v", res.Redriven, queue, err), Back: "/dlq"})
		return
	}
	skipped := 0
	for _, sk := range res.Skipped {
		skipped += sk.Count
	}
	if skipped > 0 {
		redirect(w, r, "/dlq", "redriven_all_skipped", res.Redriven, skipped)
		return
	}
	redirect(w, r, "/dlq", "redriven_all", res.Redriven)
}
