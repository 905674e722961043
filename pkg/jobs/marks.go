package jobs

import (
	"encoding/json"
	"time"
)

// What a durable job's views show of its steps: a timeline of their
// names, kinds, states and times (never a result, a signal's payload or a
// checkpoint), written with the job's state at each of its writes (a
// step's, a park's, a continuation's, the final one). Step names are
// shown: keep private data out of them.

// StepMark is one of a durable job's steps as its view shows it
// (View.Steps).
type StepMark struct {
	Name string `json:"name"`
	// Kind is "step" (Step), "sleep" (Job.Sleep), "signal" (a wait
	// for one: WaitForSignal), "child" (a wait for a child: Invoke) or
	// "children" (a wait for many: Map).
	Kind string `json:"kind"`
	// Status is "done" (a step's result stored, a sleep passed, a
	// signal received, a child or every child ended), "waiting" (a sleep or a wait not over when the
	// job was last written) or "timed_out" (a wait whose timeout came
	// first).
	Status string `json:"status"`
	// At is when it was done, or when its sleep or wait began; Until is
	// when a sleep or a wait ends.
	At    *time.Time `json:"at,omitempty"`
	Until *time.Time `json:"until,omitempty"`
}

// maxMarks bounds the marks a job's item keeps: its last steps.
const maxMarks = 32

// marksOf encodes the marks of steps, as they stand at now: the last
// maxMarks of them; "" for none.
func marksOf(steps []stepResult, now time.Time) string {
	if len(steps) == 0 {
		return ""
	}
	steps = steps[max(0, len(steps)-maxMarks):]
	out := make([]StepMark, len(steps))
	for i, st := range steps {
		m := StepMark{Name: st.Name, Kind: "step", Status: "done", At: msTime(st.At)}
		switch {
		case st.Child == childWaiting:
			m.Kind, m.Status = "child", "waiting"
		case st.Child == childEnded:
			m.Kind = "child"
		case st.Child == mapWaiting:
			m.Kind, m.Status = "children", "waiting"
		case st.Child == mapEnded:
			m.Kind = "children"
		case st.Signal == signalWaiting:
			m.Kind, m.Status, m.Until = "signal", "waiting", msTime(st.Until)
		case st.Signal == signalTimedOut:
			m.Kind, m.Status = "signal", "timed_out"
		case st.Signal == signalDelivered:
			m.Kind = "signal"
		case st.Until != 0:
			m.Kind, m.Until = "sleep", msTime(st.Until)
			if now.Before(*m.Until) {
				m.Status = "waiting"
			}
		}
		out[i] = m
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// msTime is Unix milliseconds as a time (nil for 0: a step stored before
// steps had times).
func msTime(ms int64) *time.Time {
	if ms == 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}

// stepMarks decodes a record's marks (none when it has none, or they do
// not decode).
func stepMarks(encoded string) []StepMark {
	if encoded == "" {
		return nil
	}
	var out []StepMark
	if json.Unmarshal([]byte(encoded), &out) != nil {
		return nil
	}
	return out
}

// marks are the marks of the run's steps now ("" without steps).
func (h *runHandle) marks() string {
	if h == nil {
		return ""
	}
	h.stepMu.Lock()
	defer h.stepMu.Unlock()
	return marksOf(h.steps, h.clock())
}

// clock is the engine's time (time.Now on a Job built by hand).
func (h *runHandle) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}
