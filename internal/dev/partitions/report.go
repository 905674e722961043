package partitions

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Report is what a Model recorded since it started (or since Reset).
type Report struct {
	// Scale is k (Config.Scale); Limits the limits of every key.
	Scale  float64
	Limits Limits
	// Span is the time from the first request to the last.
	Span time.Duration
	// Requests the model received; Forwarded to DynamoDB Local; Throttled
	// refused for a key's budget (each refused key of a BatchGetItem
	// counts); Conflicts refused for an item a transaction held.
	Requests, Forwarded, Throttled, Conflicts int
	// ShadowReads are the model's own, uncharged reads of items it had
	// not seen.
	ShadowReads int
	// Keys are the hottest keys, the hottest first: by their peak over
	// their partition's limit, write or read.
	Keys []KeyReport
	// ThrottledKeys are every key that refused requests, the most
	// refusals first.
	ThrottledKeys []KeyReport
	// Classes are the keys by class, the hottest class first.
	Classes []ClassReport
	// Unmodelled counts the data operations forwarded without a charge.
	Unmodelled map[string]int
	// Errors are requests the model refused because it could not charge
	// them exactly, and its predictions DynamoDB Local contradicted (the
	// first 50 of ErrorCount).
	Errors     []string
	ErrorCount int
	// Jobs, when the caller sets it to the number of jobs the run ran,
	// adds to Markdown each class's units per job: its busiest key's total
	// over Jobs, the heat a steady run would give it whatever its bursts.
	Jobs int
	// CapacityChecks counts the writes whose units the model compared
	// with DynamoDB Local's ConsumedCapacity; Mismatches are the first 50
	// of MismatchCount that differed.
	CapacityChecks int
	Mismatches     []string
	MismatchCount  int
}

// KeyReport is one partition key value's heat.
type KeyReport struct {
	// Index is "" for the table.
	Index, Key, Class string
	Write, Read       Heat
	// Conflicts counts the transactions cancelled and the writes refused
	// because a transaction held this key's item.
	Conflicts int
}

// Heat is a key's use of one kind of unit.
type Heat struct {
	// Peak is the most units accepted in one window of the model's clock:
	// one second of the service at full scale (see Model.window).
	Peak float64
	// Total is every unit accepted; Requests the requests that paid them.
	Total    float64
	Requests int
	// Refused counts the requests refused because this key's bucket was
	// short; RefusedUnits what they asked for.
	Refused      int
	RefusedUnits float64
}

// ClassReport is the heat of one class of keys: its hottest key's.
type ClassReport struct {
	Class       string
	Keys        int
	Write, Read ClassHeat
	Conflicts   int
}

// ClassHeat is a class's hottest key, for one kind of unit.
type ClassHeat struct {
	// Peak is the hottest key's peak (units in one window: a second at full
	// scale), Key that key.
	Peak float64
	Key  string
	// Total is the most units one key of the class took over the run.
	Total float64
	// Refused counts the class's refused requests (all its keys).
	Refused int
	// AtFullScale is Peak: the units per second the key would take at
	// 10,000 jobs per second (a window is a second at full scale). MaxJobsPerSecond is the rate one owner could
	// run at before the key passes its partition's limit (1,000 write or
	// 3,000 read units per second): 10,000 x limit / AtFullScale. When
	// the class was throttled, the peak is capped by the budget and the
	// true ceiling is lower (Capped).
	AtFullScale, MaxJobsPerSecond float64
	Capped                        bool
}

// Report returns what the model recorded, with the top hottest keys.
func (m *Model) Report(top int) Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := Report{
		Scale: m.scale, Limits: m.limits, Span: m.stats.last.Sub(m.stats.first),
		Requests: m.stats.requests, Forwarded: m.stats.forwarded, Throttled: m.stats.throttled, Conflicts: m.stats.conflicts,
		ShadowReads: m.stats.shadowReads, Unmodelled: map[string]int{},
		Errors: append([]string(nil), m.stats.errors...), ErrorCount: m.stats.errorCount,
		CapacityChecks: m.stats.capacityChecks, Mismatches: append([]string(nil), m.stats.mismatches...), MismatchCount: m.stats.mismatchCount,
	}
	for k, v := range m.stats.unmodelled {
		r.Unmodelled[k] = v
	}
	var keys []KeyReport
	classes := map[string]*ClassReport{}
	for pk, ks := range m.keys {
		kr := KeyReport{Index: pk.index, Key: pk.key, Class: ks.class, Write: ks.w.heat(), Read: ks.r.heat(), Conflicts: ks.conflicts}
		keys = append(keys, kr)
		if kr.Write.Refused+kr.Read.Refused > 0 {
			r.ThrottledKeys = append(r.ThrottledKeys, kr)
		}
		c, ok := classes[ks.class]
		if !ok {
			c = &ClassReport{Class: ks.class}
			classes[ks.class] = c
		}
		c.Keys++
		c.Conflicts += ks.conflicts
		c.Write.take(kr.Write, pk.key)
		c.Read.take(kr.Read, pk.key)
	}
	sort.Slice(keys, func(i, j int) bool {
		hi, hj := keys[i].heat(), keys[j].heat()
		if hi != hj {
			return hi > hj
		}
		if ri, rj := keys[i].Write.Refused+keys[i].Read.Refused, keys[j].Write.Refused+keys[j].Read.Refused; ri != rj {
			return ri > rj
		}
		return keys[i].Index+keys[i].Key < keys[j].Index+keys[j].Key
	})
	sort.Slice(r.ThrottledKeys, func(i, j int) bool {
		a, b := r.ThrottledKeys[i], r.ThrottledKeys[j]
		if ra, rb := a.Write.Refused+a.Read.Refused, b.Write.Refused+b.Read.Refused; ra != rb {
			return ra > rb
		}
		return a.Index+a.Key < b.Index+b.Key
	})
	if top >= 0 && len(keys) > top {
		keys = keys[:top]
	}
	r.Keys = keys
	for _, c := range classes {
		c.Write.scale(m.scale, PartitionWriteUnits)
		c.Read.scale(m.scale, PartitionReadUnits)
		r.Classes = append(r.Classes, *c)
	}
	sort.Slice(r.Classes, func(i, j int) bool {
		hi := math.Max(r.Classes[i].Write.Peak/PartitionWriteUnits, r.Classes[i].Read.Peak/PartitionReadUnits)
		hj := math.Max(r.Classes[j].Write.Peak/PartitionWriteUnits, r.Classes[j].Read.Peak/PartitionReadUnits)
		if hi != hj {
			return hi > hj
		}
		return r.Classes[i].Class < r.Classes[j].Class
	})
	return r
}

func (m *meter) heat() Heat {
	return Heat{Peak: m.peak, Total: m.total, Requests: m.requests, Refused: m.refused, RefusedUnits: m.refusedUnit}
}

// heat is a key's peak over its partition's limit, the higher of write
// and read.
func (k KeyReport) heat() float64 {
	return math.Max(k.Write.Peak/PartitionWriteUnits, k.Read.Peak/PartitionReadUnits)
}

func (c *ClassHeat) take(h Heat, key string) {
	c.Refused += h.Refused
	c.Total = math.Max(c.Total, h.Total)
	if h.Peak > c.Peak {
		c.Peak, c.Key = h.Peak, key
	}
}

func (c *ClassHeat) scale(k, limit float64) {
	c.Capped = c.Refused > 0
	if k <= 0 || c.Peak <= 0 {
		c.MaxJobsPerSecond = math.Inf(1)
		return
	}
	c.AtFullScale = c.Peak
	c.MaxJobsPerSecond = FullScaleJobsPerSecond * limit / c.AtFullScale
}

// Markdown renders the report for docs/evidence/CAPACITY.md: a table of the
// classes (each one's hottest key, scaled to 10,000 jobs per second, and
// the highest rate one owner sustains), then the hottest keys.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Scale k = %s: each key's budget is %s write and %s read units per second. %d requests over %v: %d throttled, %d refused for transaction conflicts.\n\n",
		num(r.Scale), num(r.Limits.WriteUnitsPerSecond), num(r.Limits.ReadUnitsPerSecond), r.Requests, r.Span.Round(time.Second), r.Throttled, r.Conflicts)
	perJob := r.Jobs > 0
	b.WriteString("| class | keys | write units in a window, hottest key | per second at 10,000 jobs/s |")
	if perJob {
		b.WriteString(" write units per job |")
	}
	b.WriteString(" read units in a window, hottest key | per second at 10,000 jobs/s |")
	if perJob {
		b.WriteString(" read units per job |")
	}
	b.WriteString(" one owner's ceiling (jobs/s) | throttled requests | transaction conflicts |\n|---|---|---|---|")
	if perJob {
		b.WriteString("---|")
	}
	b.WriteString("---|---|")
	if perJob {
		b.WriteString("---|")
	}
	b.WriteString("---|---|---|\n")
	for _, c := range r.Classes {
		fmt.Fprintf(&b, "| %s | %d | %s | %s |", c.Class, c.Keys, num(c.Write.Peak), c.Write.atFullScale())
		if perJob {
			fmt.Fprintf(&b, " %s |", r.perJob(c, c.Write))
		}
		fmt.Fprintf(&b, " %s | %s |", num(c.Read.Peak), c.Read.atFullScale())
		if perJob {
			fmt.Fprintf(&b, " %s |", r.perJob(c, c.Read))
		}
		fmt.Fprintf(&b, " %s | %d | %d |\n", c.ceiling(), c.Write.Refused+c.Read.Refused, c.Conflicts)
	}
	if len(r.Keys) > 0 {
		b.WriteString("\n| key | class | write units in a window (peak) | write units | read units in a window (peak) | read units | throttled (write / read) | conflicts |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|\n")
		for _, k := range r.Keys {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %d / %d | %d |\n", k.Name(), k.Class,
				num(k.Write.Peak), num(k.Write.Total), num(k.Read.Peak), num(k.Read.Total), k.Write.Refused, k.Read.Refused, k.Conflicts)
		}
	}
	b.WriteString("\nA window is one second of the service: at scale k the run does in 1/k seconds what the service does in one at 10,000 jobs/s, so a key's most units in a window are its units per second at full scale, and the ceiling is the rate at which the hotter of its write and read figures reaches a partition's 1,000 write or 3,000 read units per second. ")
	b.WriteString("A key's bucket holds one window of its budget (1,000 write or 3,000 read units), so an idle key can take up to twice that in its first busy window. ")
	b.WriteString("A throttled key was given no more than its budget allowed: its figures at 10,000 jobs/s are lower bounds (≥) and its ceiling an upper bound (≤).")
	if perJob {
		fmt.Fprintf(&b, " Units per job are the class's busiest key's units over the run's %d jobs: times 10,000, what that key takes at 10,000 jobs/s in a steady run (shown for keys that jobs share: a class with at most one key per two jobs).", r.Jobs)
	}
	b.WriteString("\n")
	if r.ErrorCount > 0 || r.MismatchCount > 0 {
		fmt.Fprintf(&b, "\nThe model refused or mispredicted %d requests and differed from DynamoDB Local's consumed capacity on %d of %d writes.\n", r.ErrorCount, r.MismatchCount, r.CapacityChecks)
	}
	return b.String()
}

// Name is the key as "index:value" ("table:value" for the table), cut to
// 48 characters.
func (k KeyReport) Name() string {
	ix := k.Index
	if ix == "" {
		ix = "table"
	}
	v := k.Key
	if len(v) > 40 {
		v = v[:39] + "…"
	}
	return "`" + ix + ":" + v + "`"
}

func (c ClassHeat) atFullScale() string {
	if c.Peak == 0 || c.AtFullScale == 0 {
		return "-"
	}
	if c.Capped {
		return "≥ " + num(c.AtFullScale)
	}
	return num(c.AtFullScale)
}

// perJob is a shared key's units per job of the run ("-" for a class of
// keys that are each a job's own, whose heat does not grow with the rate).
func (r Report) perJob(c ClassReport, h ClassHeat) string {
	if c.Keys*2 > r.Jobs {
		return "-"
	}
	return num(h.Total / float64(r.Jobs))
}

// ceiling is the lower of the class's write and read ceilings.
func (c ClassReport) ceiling() string {
	h := c.Write
	if c.Read.MaxJobsPerSecond < h.MaxJobsPerSecond {
		h = c.Read
	}
	if math.IsInf(h.MaxJobsPerSecond, 1) || h.MaxJobsPerSecond == 0 {
		return "-"
	}
	if h.Capped {
		return "≤ " + num(h.MaxJobsPerSecond)
	}
	return num(h.MaxJobsPerSecond)
}

func num(x float64) string {
	switch {
	case x == 0:
		return "0"
	case math.Abs(x) >= 100:
		return fmt.Sprintf("%.0f", x)
	case math.Abs(x) >= 10:
		return fmt.Sprintf("%.1f", x)
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", x), "0"), ".")
	}
}
