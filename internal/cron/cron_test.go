package cron

import (
	"strings"
	"testing"
	"time"
)

func TestParseRefuses(t *testing.T) {
	for expr, want := range map[string]string{
		"every minute":            "want cron",
		"rate(1 minutes)":         "singular",
		"rate(5 minute)":          "singular",
		"rate(0 minutes)":         "positive",
		"rate(5 weeks)":           "unit",
		"cron(0 12 * * * *)":      "exactly one",
		"cron(0 12 ? * ? *)":      "exactly one",
		"cron(0 12 * *)":          "six fields",
		"cron(60 12 * * ? *)":     "not in 0..59",
		"cron(0 12 L * ? *)":      "not supported",
		"cron(0 12 15W * ? *)":    "not supported",
		"cron(0 12 ? * 6#3 *)":    "not supported",
		"cron(0 12 ? * 6L *)":     "not supported",
		"cron(0 5-2 * * ? *)":     "backwards",
		"cron(? 12 * * ? *)":      "only for day",
		"at(2026-12-01T10:00:00)": "delayed job",
		"cron(0/0 12 * * ? *)":    "step",
		"cron(0 12 * FOO ? *)":    "not in 1..12",
	} {
		if _, err := Parse(expr); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error mentioning %q", expr, err, want)
		}
	}
}

func TestNext(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string, loc *time.Location) time.Time {
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		expr, after, want string
		loc               *time.Location
	}{
		{"cron(0 2 * * ? *)", "2026-11-30 07:00", "2026-12-01 02:00", time.UTC},
		{"cron(0 2 * * ? *)", "2026-11-30 01:59", "2026-11-30 02:00", time.UTC},
		{"cron(0 2 * * ? *)", "2026-11-30 02:00", "2026-12-01 02:00", time.UTC},
		{"cron(*/15 * * * ? *)", "2026-11-30 07:01", "2026-11-30 07:15", time.UTC},
		{"cron(0 9 ? * MON-FRI *)", "2026-12-04 10:00", "2026-12-07 09:00", paris}, // Friday -> Monday
		{"cron(0 9 ? * 2 *)", "2026-12-04 10:00", "2026-12-07 09:00", paris},       // 2 = Monday
		{"cron(30 8 1 JAN,JUL ? *)", "2026-11-30 00:00", "2027-01-01 08:30", paris},
		{"cron(0 0 29 2 ? *)", "2026-03-01 00:00", "2028-02-29 00:00", time.UTC},
		{"cron(0 12 * * ? 2025)", "2026-01-01 00:00", "", time.UTC},
		// 02:30 does not exist in Paris on 2027-03-28 (clocks jump 02:00 -> 03:00).
		{"cron(30 2 * * ? *)", "2027-03-27 03:00", "2027-03-29 02:30", paris},
	} {
		s, err := Parse(c.expr)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Next(at(c.after, c.loc), c.loc, time.Time{})
		if c.want == "" {
			if !got.IsZero() {
				t.Errorf("%s after %s = %v, want never", c.expr, c.after, got)
			}
			continue
		}
		if want := at(c.want, c.loc); !got.Equal(want) {
			t.Errorf("%s after %s = %v, want %v", c.expr, c.after, got, want)
		}
	}
	r, _ := Parse("rate(5 minutes)")
	start := at("2026-11-30 07:00", time.UTC)
	if got := r.Next(at("2026-11-30 07:12", time.UTC), time.UTC, start); !got.Equal(at("2026-11-30 07:15", time.UTC)) {
		t.Errorf("rate next = %v", got)
	}
	if got := r.Next(at("2026-11-30 07:15", time.UTC), time.UTC, start); !got.Equal(at("2026-11-30 07:20", time.UTC)) {
		t.Errorf("rate next at a fire = %v", got)
	}
}
