package emf

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A record is as short as the specification allows: a count carries no
// Unit (the specification's default, None), a duration says Milliseconds,
// counts under the same dimensions add up and durations stay apart.
func TestRecordsAreCompact(t *testing.T) {
	t.Parallel()
	b := New("ns", map[string]string{"service": "worker"})
	b.Add(map[string]string{"kind": "k"}, "JobsStarted", Count, 1)
	b.Add(map[string]string{"kind": "k"}, "JobsStarted", Count, 1)
	b.Add(map[string]string{"kind": "k"}, "RunDuration", Milliseconds, 12)
	b.Add(map[string]string{"kind": "k"}, "RunDuration", Milliseconds, 30)
	var out bytes.Buffer
	if err := b.Flush(&out, time.UnixMilli(1700000000000)); err != nil {
		t.Fatal(err)
	}
	const want = `{"JobsStarted":2,"RunDuration":[12,30],"_aws":{"CloudWatchMetrics":[{"Dimensions":[["kind","service"],["service"]],` +
		`"Metrics":[{"Name":"JobsStarted"},{"Name":"RunDuration","Unit":"Milliseconds"}],"Namespace":"ns"}],"Timestamp":1700000000000},"kind":"k","service":"worker"}`
	if got := strings.TrimSpace(out.String()); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
}
