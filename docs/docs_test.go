// Package docs holds the project's documentation, by reader, in four
// folders: guide (get started, your own service, concepts), reference
// (the HTTP API, configuration, events, the state machine), operations
// (deploying, running, security) and evidence (benchmarks, capacity and
// key heat, reliability, the simulator). Its test checks what a reader
// relies on: the README stays a landing page that links every page,
// every relative link leads somewhere, docs/ has only those folders, and
// no figure contradicts where it is measured (evidence/CAPACITY.md for
// write and read units, evidence/BENCHMARKS.md for requests and
// dollars).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// markdown returns the README and every doc, by path.
func markdown(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{"../README.md": read(t, "../README.md"), "../CHANGELOG.md": read(t, "../CHANGELOG.md")}
	files, _ := filepath.Glob("*/*.md")
	for _, f := range files {
		out[f] = read(t, f)
	}
	return out
}

// folders are docs/'s folders, one per reader.
var folders = []string{"evidence", "guide", "operations", "reference"}

// docs/ holds its four folders and this test, nothing else; the README
// links every page.
func TestDocsAreByReaderAndAllLinked(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		switch {
		case e.IsDir():
			dirs = append(dirs, e.Name())
		case !strings.HasSuffix(e.Name(), ".go"):
			t.Errorf("docs/%s: put it in one of %v", e.Name(), folders)
		}
	}
	if strings.Join(dirs, " ") != strings.Join(folders, " ") {
		t.Errorf("docs/ has folders %v, want %v", dirs, folders)
	}
	readme := read(t, "../README.md")
	pages, _ := filepath.Glob("*/*.md")
	for _, p := range pages {
		if !strings.Contains(readme, "(docs/"+p) {
			t.Errorf("README.md does not link docs/%s", p)
		}
	}
}

// The README is a landing page: at most 250 lines, with "Use it in your
// own service" linked from its first screen.
func TestReadmeIsALandingPage(t *testing.T) {
	readme := read(t, "../README.md")
	lines := strings.Split(strings.TrimRight(readme, "\n"), "\n")
	if len(lines) > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move detail to docs/", len(lines))
	}
	first := strings.Join(lines[:min(len(lines), 20)], "\n")
	if !strings.Contains(first, "(#use-it-in-your-own-service)") || !strings.Contains(readme, "\n## Use it in your own service\n") {
		t.Error(`README.md: "Use it in your own service" is not linked from its first 20 lines`)
	}
}

var (
	link = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	// code is a fenced block or an inline span, where brackets are Go.
	code = regexp.MustCompile("(?s)```.*?```|`[^`\n]*`")
)

// Every relative link of the README and the docs leads to a file.
func TestRelativeLinksResolve(t *testing.T) {
	for path, text := range markdown(t) {
		for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", path, target)
			}
		}
	}
}

// Where the figures are measured.
const (
	capacityPage = "evidence/CAPACITY.md"
	benchPage    = "evidence/BENCHMARKS.md"
)

var (
	capacityPerJob = regexp.MustCompile(`A job that publishes no partial result costs \*\*(\d+)\*\* write units`)
	benchPlainRow  = regexp.MustCompile(`(?m)^\| API-enqueued job \(example\.hash, 1 round\) \| \*\*[\d.]+\*\*:[^|]*\| ([\d.]+) \| [\d.]+ \| [\d.]+ \| [^|]* \| \*\*\$([\d.]+)\*\* \|$`)
	benchMeasured  = regexp.MustCompile(`Measured: \*\*\$([\d.]+)\*\*`)
	statedPerJob   = regexp.MustCompile(`(\d+) write units per job`)
	statedDollars  = regexp.MustCompile(`\$([\d.]+) per million jobs`)
)

// A job's write units are measured once (CAPACITY.md) and its dollars once
// (BENCHMARKS.md): the benchmark's own write units agree with the first,
// any doc that states either states the measured figure, and any doc
// (BENCHMARKS.md included) that states the units of a job shape
// CAPACITY.md measures (a transactional enqueue, a retry, a cancel, a job
// of a batch, "what is running now?") states CAPACITY.md's.
func TestFiguresAgreeWithWhereTheyAreMeasured(t *testing.T) {
	capacity, bench := read(t, capacityPage), read(t, benchPage)
	m := capacityPerJob.FindStringSubmatch(capacity)
	if m == nil {
		t.Fatal("CAPACITY.md no longer states a plain job's write units as this test reads them")
	}
	units := m[1]
	row := benchPlainRow.FindStringSubmatch(bench)
	if row == nil {
		t.Fatal("BENCHMARKS.md has no row for the API-enqueued job as this test reads it")
	}
	if got, _ := strconv.ParseFloat(row[1], 64); strconv.FormatFloat(got, 'f', -1, 64) != units {
		t.Errorf("BENCHMARKS.md measures %s write units for a plain job, CAPACITY.md %s: rerun make bench", row[1], units)
	}
	dollars := row[2]
	if mm := benchMeasured.FindStringSubmatch(bench); mm == nil || mm[1] != dollars {
		t.Errorf("BENCHMARKS.md's summary says %v, its table $%s", mm, dollars)
	}
	docs := markdown(t)
	shapesAgree(t, docs)
	for path, text := range docs {
		if path == capacityPage || path == benchPage {
			continue
		}
		for _, s := range statedPerJob.FindAllStringSubmatch(text, -1) {
			if s[1] != units {
				t.Errorf("%s says %q; CAPACITY.md measures %s", path, s[0], units)
			}
		}
		for _, s := range statedDollars.FindAllStringSubmatch(text, -1) {
			if s[1] != dollars {
				t.Errorf("%s says %q; BENCHMARKS.md measures $%s", path, s[0], dollars)
			}
		}
	}
}

// shapes are the job shapes whose units CAPACITY.md measures: measured
// finds the figure there, claims find a statement of it elsewhere (in
// text whose whitespace is folded to single spaces).
var shapes = []struct {
	name     string
	measured *regexp.Regexp
	claims   []*regexp.Regexp
}{
	{"a job enqueued inside the caller's own transaction", regexp.MustCompile(`costs \*\*(\d+)\*\* write units for its put`), []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:inside|in|within) (?:the caller's|your) own (?:DynamoDB )?transaction\b[^.;]*?\b(?:costs|pays|takes) \**(\d+)\b`),
		regexp.MustCompile(`(?i)\btransactional (?:enqueue|put)s? (?:costs|pays|takes) \**(\d+)\b`),
	}},
	{"each retry", regexp.MustCompile(`\| each retry \| \*\*(\d+)\*\*`), []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:each|a) retry (?:costs|pays|adds|takes) \**(\d+)\b`),
	}},
	{"cancelling a queued job", regexp.MustCompile(`\| cancel a queued job \| \*\*(\d+)\*\*`), []*regexp.Regexp{
		regexp.MustCompile(`(?i)\bcancel(?:ling|ing)? a queued (?:job|one) (?:costs |pays |takes )?\**(\d+)\b`),
	}},
	{"cancelling a running job", regexp.MustCompile(`\| cancel a running job \| \*\*(\d+)\*\*`), []*regexp.Regexp{
		regexp.MustCompile(`(?i)\bcancel(?:ling|ing)? a running (?:job|one) (?:costs |pays |takes )?\**(\d+)\b`),
	}},
	{"a retry from the API", regexp.MustCompile(`\| retry from the API[^|]*\| \*\*(\d+)\*\*`), []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:a )?retry (?:from|through) the API (?:costs|pays|takes) \**(\d+)\b`),
	}},
	{"a job of a batch", regexp.MustCompile(`A job of a batch costs \*\*(\d+)\*\* write units`), []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:a|each) (?:job of a batch|batched job) (?:costs|pays|takes) \**(\d+)\b`),
	}},
	{`"what is running now?" for an owner's 3 running jobs`, regexp.MustCompile(`\| the 3 running jobs of an owner[^|]*\| ([\d.]+),`), []*regexp.Regexp{
		regexp.MustCompile(`(?i)what is running now\?"?[^.;]*?\b([\d.]+) read units`),
	}},
}

var whitespace = regexp.MustCompile(`\s+`)

// shapesAgree checks that every statement of a job shape's write or read
// units in docs (the README, the docs with BENCHMARKS.md's text, the
// CHANGELOG) agrees with CAPACITY.md, where the tests measure them: a
// stale figure left behind by a change of the measured one fails here
// (better: link to it).
func shapesAgree(t *testing.T, docs map[string]string) {
	t.Helper()
	capacity := whitespace.ReplaceAllString(read(t, capacityPage), " ")
	for _, sh := range shapes {
		m := sh.measured.FindStringSubmatch(capacity)
		if m == nil {
			t.Errorf("CAPACITY.md no longer states %s's units as this test reads them", sh.name)
			continue
		}
		for path, text := range docs {
			if path == capacityPage {
				continue
			}
			text = whitespace.ReplaceAllString(fenced.ReplaceAllString(text, ""), " ")
			for _, claim := range sh.claims {
				for _, c := range claim.FindAllStringSubmatch(text, -1) {
					if c[1] != m[1] {
						t.Errorf("%s says %q: %s costs %s, CAPACITY.md measures %s (link to it instead)", path, c[0], sh.name, c[1], m[1])
					}
				}
			}
		}
	}
}

// fenced is a fenced code block.
var fenced = regexp.MustCompile("(?s)```.*?```")

// The quickstart is what a team copies: its tests run jobs through
// jobstest.Runner and the local stack, never by writing the queue's wire
// format ({"job_id": ...}) or SQS events by hand.
func TestQuickstartTestsWriteNoQueueMessages(t *testing.T) {
	err := filepath.WalkDir("../examples/quickstart", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		src := read(t, path)
		for _, wire := range []string{`"job_id"`, "events.SQSMessage", "events.SQSEvent", "HandleSQS"} {
			if strings.Contains(src, wire) {
				t.Errorf("%s writes the queue's wire format (%s): use jobstest.Runner", path, wire)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// figure is a figure a page states: dollars (per million, a month), write
// or read units, milliseconds, megabytes, requests.
var figure = regexp.MustCompile(`\$\d[\d,]*(?:\.\d+)?(?: per million| a month)?|\b\d[\d,]*(?:\.\d+)? (?:write|read) units?\b|\b\d[\d,]*(?:\.\d+)? ms\b|\b\d[\d,]*(?:\.\d+)? MB\b|\b\d[\d,]*(?:\.\d+)? requests?\b`)

// notRestated are the figures that appear in more than one page without
// being one measurement stated twice: list prices, AWS's limits, values
// the code sets, and different quantities that happen to be equal. A
// figure not here that a second page states fails
// TestEveryFigureIsStatedOnce: state it where it is measured and link to
// it, or, when two pages must both state it, hold them together in shapes.
var notRestated = map[string]string{
	"$0.0000133334":      "Lambda's list price per GB-second",
	"$0.023":             "S3's list price per GB-month",
	"$0.125 per million": "DynamoDB's list price per million read units",
	"$0.20":              "list prices: a million Lambda requests; a cell of the cost table",
	"$0.20 per million":  "Lambda's list price per million requests",
	"$0.40 per million":  "SQS's and S3's GET list price per million requests",
	"$0.625 per million": "DynamoDB's list price per million write units",
	"$1.00":              "list prices: a million API Gateway requests, Scheduler invocations",
	"$1.00 per million":  "API Gateway's and Scheduler's list price per million",
	"$1.25":              "2 write units at list price, in different sums",
	"$5.00":              "8 write units at list price, in different sums",
	"1 read unit":        "the unit itself",
	"1 write unit":       "the unit itself",
	"2 read units":       "a strongly consistent read under 8 KB, in different places",
	"2 write units":      "different pairs of writes (an index entry in and out, a slot's take and release)",
	"8 write units":      "different sums that equal 8 (the plain job's, 8 KB of item, a continuation)",
	"625 write units":    "2 writes per job at 10,000 jobs a second over 32 partitions: each index's own",
	"1,000 write units":  "DynamoDB's limit per partition",
	"3,000 read units":   "DynamoDB's limit per partition",
	"35.6 read units":    "the partition model's scaled read limit, its configuration in both",
	"10 MB":              "different bodies (a test's request, an upload's size)",
	"10,000 requests":    "KMS's price unit; the heat scenario's rate",
	"20 ms":              "the SDK's first backoff; a read's duration",
	"100 ms":             "values the code sets (the SDK's backoff, poll intervals, the sweeper's), in different places",
	"200 ms":             "different jobs' run times",
	"250 ms":             "a wait's poll interval (jobs.Service.Wait), as the code sets it",
	"300 ms":             "different delays (a fault's, a job's)",
	"7.0 ms":             "different measurements: a bench row's init; OTLP's initialisation (OPERATIONS.md)",
	"12.4 MB":            "different bootstraps: waitjob with S3 (a bench row); the worker with X-Ray (OPERATIONS.md)",
	"128 MB":             "the wait function's memory, as the descriptor sets it",
	"256 MB":             "the API functions' memory, as the descriptor sets it",
	"512 MB":             "the worker's memory, as the descriptor sets it",
}

// TestEveryFigureIsStatedOnce: a figure that appears in more than one page
// (the README, the CHANGELOG and docs/, fenced code aside) is one of
// notRestated, and each entry there still appears twice. A copy of a
// measured figure has the measured value when it is written, so it fails
// here then, before a later measurement can leave it stale; the job
// shapes' units that pages must restate are held to CAPACITY.md by
// shapesAgree instead. A copy rounded on the way ("about $3.6" of $3.62)
// is not caught.
func TestEveryFigureIsStatedOnce(t *testing.T) {
	pages := map[string]map[string]bool{}
	for path, text := range markdown(t) {
		text = whitespace.ReplaceAllString(fenced.ReplaceAllString(text, ""), " ")
		for _, f := range figure.FindAllString(text, -1) {
			if pages[f] == nil {
				pages[f] = map[string]bool{}
			}
			pages[f][path] = true
		}
	}
	for f, in := range pages {
		if len(in) < 2 || notRestated[f] != "" {
			continue
		}
		t.Errorf("%q is stated in %d pages (%v): state it once, where it is measured, and link to it", f, len(in), sortedKeys(in))
	}
	for f := range notRestated {
		if len(pages[f]) < 2 {
			t.Errorf("notRestated lists %q, which %d pages state: drop it", f, len(pages[f]))
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var (
	changelogVersion = regexp.MustCompile(`(?m)^## \[(Unreleased|\d+\.\d+\.\d+)\]( - \d{4}-\d{2}-\d{2})?$`)
	changelogGroup   = regexp.MustCompile(`(?m)^### (.*)$`)
)

// The CHANGELOG is for a person upgrading (Keep a Changelog): an
// Unreleased section, then each release with its date, newest first, each
// at most 150 lines, grouped under Added, Changed, Deprecated, Removed,
// Fixed and Security only.
func TestChangelogIsForUpgraders(t *testing.T) {
	text := read(t, "../CHANGELOG.md")
	heads := changelogVersion.FindAllStringSubmatchIndex(text, -1)
	if len(heads) < 2 || text[heads[0][2]:heads[0][3]] != "Unreleased" {
		t.Fatalf("CHANGELOG.md: want an Unreleased section, then the releases (found %d sections)", len(heads))
	}
	for i, h := range heads {
		end := len(text)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		name, body := text[h[2]:h[3]], text[h[0]:end]
		if i > 0 && h[4] < 0 {
			t.Errorf("CHANGELOG.md: release %s has no date", name)
		}
		if n := strings.Count(body, "\n"); n > 150 {
			t.Errorf("CHANGELOG.md: section %s has %d lines, want at most 150", name, n)
		}
		for _, g := range changelogGroup.FindAllStringSubmatch(body, -1) {
			switch g[1] {
			case "Added", "Changed", "Deprecated", "Removed", "Fixed", "Security":
			default:
				t.Errorf("CHANGELOG.md: section %s groups changes under %q", name, g[1])
			}
		}
	}
}
