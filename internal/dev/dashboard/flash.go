package dashboard

import (
	"fmt"
	"net/url"
	"strconv"
)

// A page shows a message after a form's action through its redirect's
// query: ?flash=CODE, a code of the table below, and for the codes with
// counts those counts as integers of their own parameters. The page shows
// the dashboard's text for the code; an unknown code, or a count that is
// not a small non-negative integer, shows nothing. No text of the query
// reaches the page: a link from another site can only choose among these
// messages, never write one ("your session expired, sign in at ...").
// A refused action has no code: its page shows the API's problem itself.

// flashText is what a code shows: a message, with one %d per count.
type flashText struct {
	text   string
	counts []string // the query parameters of the counts, in order
}

// flashes is every message a redirect can ask a page to show, by code.
var flashes = map[string]flashText{
	"cancelled":          {text: "Cancelled."},
	"cancel_requested":   {text: "Cancel requested: the job stops at its next check."},
	"retried":            {text: "Queued again as a new attempt."},
	"replayed":           {text: "Replayed as a new job."},
	"signalled":          {text: "Signal delivered: the job runs on with it."},
	"signal_kept":        {text: "Signal kept: the job gets it when it waits for it."},
	"signal_duplicate":   {text: "Not done: the job has that signal already."},
	"payload_not_json":   {text: "Not done: the payload is not valid JSON."},
	"bulk_needs_filter":  {text: "Choose a status, a kind or a tag first: a bulk action needs a filter."},
	"bulk_cancelled":     {text: "%d jobs matched, %d cancelled.", counts: []string{"matched", "changed"}},
	"bulk_retried":       {text: "%d jobs matched, %d retried.", counts: []string{"matched", "changed"}},
	"redriven":           {text: "The message is back on the queue."},
	"paused":             {text: "Paused: its queued jobs stop starting within 5 seconds; running ones run on."},
	"resumed":            {text: "Resumed: each held job starts within the delay it was last handed back with (15 minutes at most)."},
	"resume_other_owner": {text: "Not resumed: that owner's key is not the pause's. Give the owner whose jobs it holds."},
	"redriven_all":       {text: "%d messages are back on the queue.", counts: []string{"n"}},
	"redriven_all_skipped": {text: "%d messages are back on the queue; %d left in the dead-letter queue, not being job references (see each one's sort and sender, and redrive it anyway only if you trust it).",
		counts: []string{"n", "skipped"}},
}

// flashOf is the message q asks for ("" for none).
func flashOf(q url.Values) string {
	f, ok := flashes[q.Get("flash")]
	if !ok {
		return ""
	}
	args := make([]any, len(f.counts))
	for i, name := range f.counts {
		n, err := strconv.ParseUint(q.Get(name), 10, 31)
		if err != nil {
			return ""
		}
		args[i] = n
	}
	return fmt.Sprintf(f.text, args...)
}

// flashQuery sets code and its counts (in the order of its table entry)
// on q, in place of any message q had. A code missing from the table, or
// counts that do not match it, set nothing: the page shows no message
// rather than a wrong one.
func flashQuery(q url.Values, code string, counts ...int) {
	q.Del("flash")
	for _, f := range flashes {
		for _, name := range f.counts {
			q.Del(name)
		}
	}
	f, ok := flashes[code]
	if !ok || len(counts) != len(f.counts) {
		return
	}
	q.Set("flash", code)
	for i, name := range f.counts {
		q.Set(name, strconv.Itoa(counts[i]))
	}
}
