package localstack

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/metricnames"
)

// StatsPath is where the local stack serves the metrics its functions
// wrote (GET), for `ljob stats`. API Gateway has no such route: it is the
// local stand-in for the CloudWatch dashboard.
const StatsPath = "/local/stats"

// Stats gathers the metrics the functions write in Embedded Metric Format
// with their output, per kind, as CloudWatch would from their logs.
type Stats struct {
	mu     sync.Mutex
	counts map[string]map[string]float64   // kind -> metric -> sum
	values map[string]map[string][]float64 // kind -> duration metric -> values
	// ended holds, per kind, when runs ended and how many (the records'
	// own timestamps), for the last RateWindow: the throughput.
	ended map[string][]stamp
	// now is the clock of the window (time.Now when nil).
	now func() time.Time
}

type stamp struct {
	at time.Time
	n  float64
}

// RateWindow is the window of KindStats.EndedPerMinute.
const RateWindow = 5 * time.Minute

// NewStats returns an empty Stats.
func NewStats() *Stats {
	return &Stats{counts: map[string]map[string]float64{}, values: map[string]map[string][]float64{}, ended: map[string][]stamp{}}
}

// Writer returns a writer for one function's output: it passes every line
// on to out, and reads the metrics of EMF lines.
func (s *Stats) Writer(out io.Writer) io.Writer { return &statsWriter{stats: s, out: out} }

type statsWriter struct {
	stats *Stats
	out   io.Writer
	buf   []byte
}

func (w *statsWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.stats.read(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 1<<20 {
		w.buf = nil // a line that long is no metric
	}
	return w.out.Write(p)
}

// read takes one output line; EMF records with a kind count.
func (s *Stats) read(line []byte) {
	if !bytes.Contains(line, []byte(`"_aws"`)) {
		return
	}
	var rec map[string]any
	if json.Unmarshal(line, &rec) != nil {
		return
	}
	kind, _ := rec[metricnames.Kind].(string)
	aws, _ := rec["_aws"].(map[string]any)
	directives, _ := aws["CloudWatchMetrics"].([]any)
	if kind == "" || len(directives) == 0 {
		return
	}
	metrics, _ := directives[0].(map[string]any)["Metrics"].([]any)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts[kind] == nil {
		s.counts[kind], s.values[kind] = map[string]float64{}, map[string][]float64{}
	}
	for _, m := range metrics {
		mm, _ := m.(map[string]any)
		name, _ := mm["Name"].(string)
		unit, _ := mm["Unit"].(string)
		var vals []float64
		switch v := rec[name].(type) {
		case float64:
			vals = []float64{v}
		case []any:
			for _, x := range v {
				if f, ok := x.(float64); ok {
					vals = append(vals, f)
				}
			}
		}
		if unit == "Milliseconds" {
			s.values[kind][name] = append(s.values[kind][name], vals...)
			continue
		}
		for _, v := range vals {
			s.counts[kind][name] += v
		}
		if name == metricnames.JobsSucceeded || name == metricnames.JobsFailed || name == metricnames.JobsCancelled {
			ts, _ := aws["Timestamp"].(float64)
			for _, v := range vals {
				s.ended[kind] = append(s.ended[kind], stamp{at: time.UnixMilli(int64(ts)), n: v})
			}
		}
	}
	s.trim(kind)
}

// trim forgets the ends older than the window.
func (s *Stats) trim(kind string) {
	cut := s.clock().Add(-RateWindow)
	e := s.ended[kind]
	i := 0
	for i < len(e) && e[i].at.Before(cut) {
		i++
	}
	s.ended[kind] = e[i:]
}

func (s *Stats) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// KindStats is what a kind did, as `ljob stats` shows it.
type KindStats struct {
	Counts    map[string]float64 `json:"counts"`
	Durations map[string]Summary `json:"durations_ms"`
	// EndedPerMinute is the throughput: runs that ended (succeeded,
	// failed or cancelled) per minute over the last RateWindow.
	EndedPerMinute float64 `json:"ended_per_minute"`
}

// Summary summarises a duration metric.
type Summary struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// Snapshot returns the stats so far, by kind.
func (s *Stats) Snapshot() map[string]KindStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]KindStats{}
	for kind, counts := range s.counts {
		ks := KindStats{Counts: map[string]float64{}, Durations: map[string]Summary{}}
		s.trim(kind)
		for _, e := range s.ended[kind] {
			ks.EndedPerMinute += e.n
		}
		ks.EndedPerMinute /= RateWindow.Minutes()
		for k, v := range counts {
			ks.Counts[k] = v
		}
		for name, vals := range s.values[kind] {
			sorted := append([]float64(nil), vals...)
			sort.Float64s(sorted)
			at := func(q float64) float64 { return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))] }
			ks.Durations[name] = Summary{N: len(sorted), P50: at(0.5), P99: at(0.99)}
		}
		out[kind] = ks
	}
	return out
}

// ServeHTTP answers GET with the snapshot as JSON: {"kinds": {...}}.
func (s *Stats) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"kinds": s.Snapshot()})
}
