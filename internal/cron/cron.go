// Package cron parses EventBridge Scheduler's recurring expressions,
// "cron(minutes hours day-of-month month day-of-week year)" and
// "rate(value unit)", and computes their fire times in a time zone, so that
// declarations are refused before they reach AWS and the local stack fires
// schedules when Scheduler would.
//
// Supported in cron fields: numbers, "*", ranges "a-b", lists "a,b", steps
// "*/n" and "a-b/n" and "a/n", month names JAN-DEC, day names SUN-SAT
// (1 = Sunday, as AWS counts), and "?" in exactly one of day-of-month and
// day-of-week, as AWS requires. Not supported yet: the "L", "W" and "#"
// wildcards (refused with an error saying so).
package cron

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Spec is a parsed expression.
type Spec struct {
	expr string
	// rate
	every time.Duration
	// cron
	minute, hour, dom, month, dow, year set
	domAny, dowAny                      bool // "?"
}

type set map[int]bool

// String returns the expression as given.
func (s *Spec) String() string { return s.expr }

// Rate returns the period of a rate expression (0 for cron).
func (s *Spec) Rate() time.Duration { return s.every }

// Parse parses a cron or rate expression.
func Parse(expr string) (*Spec, error) {
	switch {
	case strings.HasPrefix(expr, "rate(") && strings.HasSuffix(expr, ")"):
		return parseRate(expr)
	case strings.HasPrefix(expr, "cron(") && strings.HasSuffix(expr, ")"):
		return parseCron(expr)
	case strings.HasPrefix(expr, "at("):
		return nil, fmt.Errorf("%q: a one-time schedule is a delayed job (run_at), not a periodic one", expr)
	}
	return nil, fmt.Errorf("%q: want cron(minutes hours day-of-month month day-of-week year) or rate(value unit)", expr)
}

func parseRate(expr string) (*Spec, error) {
	f := strings.Fields(expr[len("rate(") : len(expr)-1])
	if len(f) != 2 {
		return nil, fmt.Errorf("%q: want rate(value unit), e.g. rate(5 minutes)", expr)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("%q: the value must be a positive whole number", expr)
	}
	units := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}
	unit, plural := strings.CutSuffix(f[1], "s")
	d, ok := units[unit]
	if !ok {
		return nil, fmt.Errorf("%q: the unit must be minute(s), hour(s) or day(s)", expr)
	}
	if plural != (n > 1) {
		return nil, fmt.Errorf("%q: AWS wants the singular unit for 1 and the plural above (rate(1 minute), rate(5 minutes))", expr)
	}
	return &Spec{expr: expr, every: time.Duration(n) * d}, nil
}

var (
	monthNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6, "JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}
	dayNames   = map[string]int{"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
)

func parseCron(expr string) (*Spec, error) {
	f := strings.Fields(expr[len("cron(") : len(expr)-1])
	if len(f) != 6 {
		return nil, fmt.Errorf("%q: want six fields: minutes hours day-of-month month day-of-week year", expr)
	}
	s := &Spec{expr: expr}
	var err error
	fields := []struct {
		name     string
		dst      *set
		lo, hi   int
		names    map[string]int
		question *bool
	}{
		{"minutes", &s.minute, 0, 59, nil, nil},
		{"hours", &s.hour, 0, 23, nil, nil},
		{"day-of-month", &s.dom, 1, 31, nil, &s.domAny},
		{"month", &s.month, 1, 12, monthNames, nil},
		{"day-of-week", &s.dow, 1, 7, dayNames, &s.dowAny},
		{"year", &s.year, 1970, 2199, nil, nil},
	}
	for i, fd := range fields {
		v := f[i]
		if v == "?" {
			if fd.question == nil {
				return nil, fmt.Errorf("%q: '?' is only for day-of-month or day-of-week", expr)
			}
			*fd.question = true
			*fd.dst = nil
			continue
		}
		upper := strings.ToUpper(v)
		if strings.Contains(v, "#") || (fd.names == nil && strings.ContainsAny(upper, "LW")) || (fd.question != nil && strings.HasSuffix(upper, "L")) {
			return nil, fmt.Errorf("%q: the L, W and # wildcards (%s) are not supported by lambdajobs yet", expr, fd.name)
		}
		if *fd.dst, err = parseField(v, fd.lo, fd.hi, fd.names); err != nil {
			return nil, fmt.Errorf("%q: %s: %w", expr, fd.name, err)
		}
	}
	if s.domAny == s.dowAny {
		return nil, fmt.Errorf("%q: exactly one of day-of-month and day-of-week must be '?'", expr)
	}
	return s, nil
}

func parseField(v string, lo, hi int, names map[string]int) (set, error) {
	out := set{}
	num := func(p string) (int, error) {
		if n, ok := names[strings.ToUpper(p)]; ok {
			return n, nil
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < lo || n > hi {
			return 0, fmt.Errorf("%q is not in %d..%d", p, lo, hi)
		}
		return n, nil
	}
	for _, part := range strings.Split(v, ",") {
		rng, stepStr, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepStr)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("step %q: want a positive whole number", stepStr)
			}
			step = n
		}
		a, b := lo, hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			x, y, _ := strings.Cut(rng, "-")
			var err error
			if a, err = num(x); err != nil {
				return nil, err
			}
			if b, err = num(y); err != nil {
				return nil, err
			}
			if a > b {
				return nil, fmt.Errorf("range %q runs backwards", rng)
			}
		default:
			n, err := num(rng)
			if err != nil {
				return nil, err
			}
			a = n
			if !hasStep {
				b = n
			}
		}
		for i := a; i <= b; i += step {
			out[i] = true
		}
	}
	if len(out) == 0 {
		return nil, errors.New("matches nothing")
	}
	return out, nil
}

// Next returns the first fire time strictly after t, in loc; for a rate
// expression, anchored at start (Scheduler counts a rate from the
// schedule's creation). The zero time when the expression never fires
// again (its years are over).
func (s *Spec) Next(t time.Time, loc *time.Location, start time.Time) time.Time {
	if s.every > 0 {
		if t.Before(start) {
			return start.Add(s.every)
		}
		n := t.Sub(start)/s.every + 1
		return start.Add(n * s.every)
	}
	t = t.In(loc).Truncate(time.Minute).Add(time.Minute)
	for t.Year() <= 2199 {
		switch {
		case !s.year[t.Year()]:
			t = time.Date(t.Year()+1, 1, 1, 0, 0, 0, 0, loc)
		case !s.month[int(t.Month())]:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, loc)
		case !s.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, loc)
		case !s.hour[t.Hour()]:
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, loc)
		case !s.minute[t.Minute()]:
			t = t.Add(time.Minute)
		default:
			return t
		}
	}
	return time.Time{}
}

func (s *Spec) dayMatches(t time.Time) bool {
	if s.domAny {
		return s.dow[int(t.Weekday())+1]
	}
	return s.dom[t.Day()]
}
