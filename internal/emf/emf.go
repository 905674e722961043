// Package emf writes metrics in CloudWatch's Embedded Metric Format: JSON
// log lines that CloudWatch Logs turns into metrics, so a function counts
// what it does without a request to CloudWatch.
//
// The format (docs.aws.amazon.com, "Embedded metric format specification"):
//
//	{"_aws": {"Timestamp": <ms>, "CloudWatchMetrics": [{"Namespace": "...",
//	  "Dimensions": [["kind", "service"], ["service"]], "Metrics": [{"Name": "...", "Unit": "..."}]}]},
//	 "service": "...", "kind": "...", "<metric>": <number or [numbers]>}
//
// A Batch gathers the metrics of one invocation, one record per set of
// dimension values, and writes them in one go: a busy worker writes a few
// lines per batch of jobs, not a line per event.
//
// Records are as short as the specification allows: a Count metric is
// written without its Unit, which the specification reads as None (the
// same statistics; no alarm or dashboard of the construct names a unit),
// so each is 15 bytes shorter; Milliseconds keeps its unit.
package emf

import (
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Units used here (the specification allows these among others).
const (
	Count        = "Count"
	Milliseconds = "Milliseconds"
)

// Limits of the specification: at most 100 metrics in a record and 30
// dimensions in a set; at most 100 values of one metric in a record.
const (
	MaxMetrics    = 100
	MaxDimensions = 30
	MaxValues     = 100
)

// Batch gathers metrics until Flush. It is safe for concurrent use; a nil
// *Batch ignores everything (metrics off).
type Batch struct {
	mu      sync.Mutex
	ns      string
	base    map[string]string // dimensions every record carries (service)
	records map[string]*record
	order   []string
}

type record struct {
	dims   map[string]string
	units  map[string]string
	values map[string][]float64
	names  []string
}

// New returns a Batch for namespace whose records all carry base's
// dimensions.
func New(namespace string, base map[string]string) *Batch {
	return &Batch{ns: namespace, base: base, records: map[string]*record{}}
}

// Add records value of metric name (in unit) under the dimensions dims
// (besides the base ones). Counts under the same dimensions add up.
func (b *Batch) Add(dims map[string]string, name, unit string, value float64) {
	if b == nil {
		return
	}
	all := map[string]string{}
	for k, v := range b.base {
		all[k] = v
	}
	for k, v := range dims {
		all[k] = v
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var id strings.Builder
	for _, k := range keys {
		id.WriteString(k + "=" + all[k] + "\x00")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.records[id.String()]
	if !ok {
		r = &record{dims: all, units: map[string]string{}, values: map[string][]float64{}}
		b.records[id.String()] = r
		b.order = append(b.order, id.String())
	}
	if _, seen := r.units[name]; !seen {
		r.units[name] = unit
		r.names = append(r.names, name)
	}
	v := r.values[name]
	switch {
	case unit == Count && len(v) == 1:
		v[0] += value
	case len(v) < MaxValues:
		v = append(v, value)
	}
	r.values[name] = v
}

// Flush writes one line per record to w and empties the batch.
func (b *Batch) Flush(w io.Writer, now time.Time) error {
	if b == nil || w == nil {
		return nil
	}
	b.mu.Lock()
	order, records := b.order, b.records
	b.order, b.records = nil, map[string]*record{}
	b.mu.Unlock()
	var out []byte
	for _, id := range order {
		line, err := b.encode(records[id], now)
		if err != nil {
			return err
		}
		out = append(append(out, line...), '\n')
	}
	if len(out) == 0 {
		return nil
	}
	_, err := w.Write(out)
	return err
}

func (b *Batch) encode(r *record, now time.Time) ([]byte, error) {
	dimNames := make([]string, 0, len(r.dims))
	for k := range r.dims {
		dimNames = append(dimNames, k)
	}
	sort.Strings(dimNames)
	if len(dimNames) > MaxDimensions {
		dimNames = dimNames[:MaxDimensions]
	}
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit,omitempty"` // none for Count
	}
	names := slices.Clone(r.names)
	if len(names) > MaxMetrics {
		names = names[:MaxMetrics]
	}
	metrics := make([]metric, len(names))
	doc := map[string]any{}
	for i, n := range names {
		metrics[i] = metric{Name: n, Unit: r.units[n]}
		if metrics[i].Unit == Count {
			metrics[i].Unit = ""
		}
		if v := r.values[n]; len(v) == 1 {
			doc[n] = v[0]
		} else {
			doc[n] = v
		}
	}
	for _, k := range dimNames {
		doc[k] = r.dims[k]
	}
	// Each record is also published under the base dimensions alone
	// (service), so that alarms, which cannot search, can watch the
	// totals of every kind.
	sets := [][]string{dimNames}
	if len(dimNames) > len(b.base) {
		base := make([]string, 0, len(b.base))
		for k := range b.base {
			base = append(base, k)
		}
		sort.Strings(base)
		sets = append(sets, base)
	}
	doc["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  b.ns,
			"Dimensions": sets,
			"Metrics":    metrics,
		}},
	}
	return json.Marshal(doc)
}
