// Package dashboard is the web dashboard: find jobs, act on them and pause
// them, over the jobs HTTP API (so it sees exactly what its caller may see, and acts
// with the caller's identity), plus the dead-letter queue and, on the local
// stack, the functions' metrics and the job events of the local bus. Server-rendered with html/template and a
// little JavaScript for live updates; every asset is embedded. `make run`
// serves it at http://127.0.0.1:8081/ against the local stack, `ljob ui`
// against a deployed API (signing with the operator's AWS credentials).
//
// Because it acts with its caller's identity, it guards itself against the
// other websites its operator visits: it answers only requests addressed to
// the address it listens on (Config.Addr; DNS rebinding), refuses
// cross-origin POSTs (http.CrossOriginProtection; cross-site request
// forgery), cannot be framed (clickjacking), and no GET changes anything.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/internal/dev/hostcheck"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

//go:embed assets
var assets embed.FS

// Config is what a dashboard talks to, and where it listens.
type Config struct {
	// Addr is the address the dashboard listens on, as its listener
	// reports it (ln.Addr().String(), such as 127.0.0.1:8081). The
	// dashboard answers only requests whose Host is this address or, when
	// it is a loopback address, localhost with the same port: another
	// Host (a DNS-rebound name) gets 421 Misdirected Request and no page.
	// New refuses an empty Addr, a port 0 and an address on every
	// interface (0.0.0.0, ::), whose Host it cannot know.
	Addr string
	// API is the jobs API's base URL.
	API *url.URL
	// Do sends a request to the API (http.DefaultClient.Do when nil);
	// `ljob ui` signs them.
	Do func(*http.Request) (*http.Response, error)
	// Caller names the local caller (X-Local-Caller) on the local stack.
	Caller string
	// Stats, when set, is the local stack's metrics endpoint.
	Stats *url.URL
	// Events, when set, is the local stack's event bus (its GET lists the
	// job events it received): the Events page reads it.
	Events *url.URL
	// DLQ, when set, is the dead-letter queue the dashboard shows and
	// redrives.
	DLQ DLQ
	// Operator uses the admin routes: any owner's jobs, one owner at a
	// time (the caller must be one of the deployment's operators).
	Operator bool
	Log      *slog.Logger
}

// DLQ is the dead-letter queues, as the dashboard needs them: the default
// lane's ("") and each other lane's, named by lane.
type DLQ interface {
	// Depths returns the approximate number of messages in each lane's
	// queue and dead-letter queue.
	Depths(ctx context.Context) (sqsqueue.Depths, error)
	// Peek returns up to max messages of lane's dead-letter queue without
	// taking them.
	Peek(ctx context.Context, lane string, max int) ([]DeadLetter, error)
	// Redrive moves the message with this id back to lane's queue;
	// RedriveAll moves every message, returning how many it moved and what
	// it left. Both move job references only, unless anyShape.
	Redrive(ctx context.Context, lane, id string, anyShape bool) error
	RedriveAll(ctx context.Context, lane string, anyShape bool) (httpapi.RedriveAnswer, error)
}

// DeadLetter is one dead-letter queue message, described by its shape
// (never its body, which may hold anything), as the API's operators'
// routes describe it.
type DeadLetter = sqsqueue.DeadLetter

// Server serves the dashboard.
type Server struct {
	cfg   Config
	tmpl  *template.Template
	mux   *http.ServeMux
	hosts hostcheck.Hosts // the Host values answered (Config.Addr)
	app   http.Handler    // mux behind the cross-origin check
}

// New returns a dashboard server.
func New(cfg Config) (*Server, error) {
	if cfg.API == nil {
		return nil, errors.New("dashboard: the API's URL is required")
	}
	hosts, err := hostcheck.For(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("dashboard: Config.Addr must be the one address it listens on: %w", err)
	}
	if cfg.Do == nil {
		c := &http.Client{Timeout: apiTimeout}
		cfg.Do = c.Do
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(template.FuncMap{
		"when": func(t any) string {
			switch v := t.(type) {
			case time.Time:
				if v.IsZero() {
					return "-"
				}
				return v.UTC().Format("2006-01-02 15:04:05.000")
			case *time.Time:
				if v == nil {
					return "-"
				}
				return v.UTC().Format("2006-01-02 15:04:05.000")
			}
			return "-"
		},
		"deref": func(s *string) string {
			if s == nil {
				return ""
			}
			return *s
		},
		"pretty": func(raw json.RawMessage) string {
			if len(raw) == 0 || string(raw) == "null" {
				return ""
			}
			var b bytes.Buffer
			if json.Indent(&b, raw, "", "  ") != nil {
				return string(raw)
			}
			return b.String()
		},
		"sum": func(ns ...int) int {
			t := 0
			for _, n := range ns {
				t += n
			}
			return t
		},
	}).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, tmpl: tmpl, mux: http.NewServeMux(), hosts: hosts}
	s.routes()
	// Every POST changes something (or, for /dlq/peek, receives messages):
	// a browser's cross-origin POST (Sec-Fetch-Site other than same-origin,
	// or else an Origin other than the Host) is refused before any route
	// runs. No origin is trusted besides the dashboard's own.
	csrf := http.NewCrossOriginProtection()
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.cfg.Log.Warn("dashboard: refused a cross-origin request", slog.String("method", r.Method), slog.String("path", r.URL.Path))
		http.Error(w, "cross-origin request refused: act from the dashboard's own pages", http.StatusForbidden)
	}))
	s.app = csrf.Handler(s.mux)
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	// A Host other than the dashboard's own address is another site's
	// name pointed at this machine (DNS rebinding): its pages would be that
	// site's origin, free to read and post. 421: this server does not
	// serve that authority.
	if !s.hosts.Allows(r.Host) {
		s.cfg.Log.Warn("dashboard: refused a request for another host", slog.String("method", r.Method), slog.String("path", r.URL.Path))
		http.Error(w, "misdirected request: this dashboard answers only at http://"+s.cfg.Addr+"/", http.StatusMisdirectedRequest)
		return
	}
	s.app.ServeHTTP(w, r)
}

func (s *Server) routes() {
	static := http.FileServerFS(assets)
	s.mux.Handle("GET /assets/", static)
	s.mux.HandleFunc("GET /{$}", s.overview)
	s.mux.HandleFunc("GET /jobs", s.jobList)
	s.mux.HandleFunc("GET /jobs/{id}", s.jobDetail)
	s.mux.HandleFunc("GET /api/jobs/{id}", s.jobJSON)
	s.mux.HandleFunc("POST /jobs/{id}/cancel", s.jobAction("cancel"))
	s.mux.HandleFunc("POST /jobs/{id}/retry", s.jobAction("retry"))
	s.mux.HandleFunc("POST /jobs/{id}/replay", s.replay)
	s.mux.HandleFunc("POST /jobs/{id}/signal", s.signal)
	s.mux.HandleFunc("POST /bulk/{action}", s.bulk)
	s.mux.HandleFunc("GET /batches/{id}", s.batchDetail)
	s.mux.HandleFunc("GET /schedules", s.schedules)
	s.mux.HandleFunc("GET /pauses", s.pauses)
	s.mux.HandleFunc("POST /pauses", s.pause)
	s.mux.HandleFunc("POST /pauses/resume", s.resume)
	s.mux.HandleFunc("GET /events", s.events)
	s.mux.HandleFunc("GET /dlq", s.dlq)
	s.mux.HandleFunc("POST /dlq/peek", s.dlqPeek)
	s.mux.HandleFunc("POST /dlq/redrive", s.redrive)
}

// call sends one request to the jobs API as the dashboard's caller.
func (s *Server) call(ctx context.Context, req apiclient.Request, out any) (int, string, error) {
	return callAPI(ctx, &apiclient.Client{Base: s.cfg.API, Do: s.cfg.Do, Caller: s.cfg.Caller}, req, out)
}

// callAPI sends req and decodes a JSON answer into out; it returns the
// status and, for a problem, its title and detail.
func callAPI(ctx context.Context, c *apiclient.Client, req apiclient.Request, out any) (int, string, error) {
	resp, err := c.Call(ctx, req, out)
	var p *apiclient.Problem
	switch {
	case errors.As(err, &p):
		return p.Status, p.Message(), nil
	case err != nil && resp != nil:
		return resp.Status, "", fmt.Errorf("dashboard: %w", err)
	case err != nil:
		return 0, "", err
	}
	return resp.Status, "", nil
}

// apiTimeout bounds each call of the dashboard's own client to the API;
// pageWait, the waits of a job's page, is well under it.
const (
	apiTimeout = 15 * time.Second
	pageWait   = 10 * time.Second
)

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	// Flash is a message of the dashboard's own: one of flashes, or a
	// page's fixed hint; never text from the request.
	Flash   string
	Problem string
	// Back is where problem.html links back to ("": the jobs).
	Back string
	Data any
}

func (s *Server) render(w http.ResponseWriter, name string, status int, p page) {
	var b bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&b, name, p); err != nil {
		s.cfg.Log.Error("dashboard: template", slog.String("template", name), slog.String("error", err.Error()))
		http.Error(w, "template error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

func (s *Server) fail(w http.ResponseWriter, nav string, err error) {
	s.cfg.Log.Warn("dashboard: the API", slog.String("error", err.Error()))
	s.render(w, "problem.html", http.StatusBadGateway, page{Title: "The API did not answer", Nav: nav, Problem: "The jobs API did not answer: " + err.Error()})
}

// redirect goes back to where a form came from, with the message of
// code and its counts (see flashes; "" for none).
func redirect(w http.ResponseWriter, r *http.Request, to, code string, counts ...int) {
	u, err := url.Parse(to)
	if err != nil || u.IsAbs() || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		u = &url.URL{Path: "/"}
	}
	q := u.Query()
	flashQuery(q, code, counts...)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// refused shows why an action was not done: the API's problem (or the
// queue's error), on a page of its own with a way back. It is not a
// redirect's message, which only names a message of the dashboard's own.
func (s *Server) refused(w http.ResponseWriter, status int, p page) {
	if p.Title == "" {
		p.Title = "Not done"
	}
	s.render(w, "problem.html", status, p)
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
