package jobstest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// claims checks claims: one winner, stamped with its token, lease and
// attempt; a job not yet due or of a skipped kind is not claimed.
func (c suite) claims(t *testing.T) {
	ctx := context.Background()

	c.run(t, "ClaimStampsTokenLeaseAttempt", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		clock.Advance(time.Second)
		now := clock.Now()
		got, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "tok-1", At: now, LeaseUntil: now.Add(30 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != jobs.StatusRunning || got.ClaimToken != "tok-1" || got.Attempt != 1 ||
			!got.LeaseUntil.Equal(now.Add(30*time.Second)) || !got.StartedAt.Equal(now) {
			t.Fatalf("claimed record %+v", got)
		}
		if string(got.Payload) != string(rec.Payload) || got.Kind != rec.Kind || got.Owner != rec.Owner {
			t.Fatalf("claim did not return the job's payload/kind/owner: %+v", got)
		}
		if stored := mustGet(t, s, rec.ID); stored.ClaimToken != "tok-1" || stored.Status != jobs.StatusRunning {
			t.Fatalf("stored after claim: %+v", stored)
		}
	})

	c.run(t, "SecondClaimFails", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		mustClaim(t, s, rec.ID, clock.Now())
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "other", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		wantConflict(t, err, jobs.StatusRunning)
		if got := mustGet(t, s, rec.ID); got.Attempt != 1 || got.ClaimToken == "other" {
			t.Fatalf("losing claim changed the job: %+v", got)
		}
	})

	c.run(t, "ClaimUnknownIsNotFound", func(t *testing.T, s driver.Store, clock *Clock) {
		_, err := s.Claim(ctx, wire.NewID(), driver.Claim{Token: "t", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		if !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
		if _, err := s.Get(ctx, wire.NewID()); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("a failed claim created a job: %v", err)
		}
	})

	c.run(t, "ConcurrentClaimsOneWinner", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		const n = 16
		var wg sync.WaitGroup
		wins := make(chan string, n)
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				token := fmt.Sprintf("tok-%d", i)
				_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: token, At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
				switch {
				case err == nil:
					wins <- token
				case isConflict(err):
				default:
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(wins)
		close(errs)
		for err := range errs {
			t.Fatalf("unexpected claim error: %v", err)
		}
		var winners []string
		for w := range wins {
			winners = append(winners, w)
		}
		if len(winners) != 1 {
			t.Fatalf("%d claims won (%v), want exactly 1", len(winners), winners)
		}
		if got := mustGet(t, s, rec.ID); got.ClaimToken != winners[0] || got.Attempt != 1 {
			t.Fatalf("stored token %q attempt %d, want %q and 1", got.ClaimToken, got.Attempt, winners[0])
		}
	})

	c.run(t, "DelayedJobIsClaimedOnlyWhenDue", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := NewRecord(wire.NewID(), clock.Now())
		rec.RunAt = clock.Now().Add(10 * time.Minute)
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "early", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		wantConflict(t, err, jobs.StatusQueued)
		clock.Advance(10 * time.Minute)
		if _, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "on-time", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatalf("claim at run_at: %v", err)
		}
	})

	c.run(t, "ClaimSkipsKindsThatNeedMoreTime", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute), SkipKinds: []string{"slow", rec.Kind}})
		wantConflict(t, err, jobs.StatusQueued)
		if got := mustGet(t, s, rec.ID); got.Attempt != 0 || got.Status != jobs.StatusQueued {
			t.Fatalf("a skipped claim changed the job: %+v", got)
		}
		if _, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute), SkipKinds: []string{"slow"}}); err != nil {
			t.Fatalf("claim skipping other kinds: %v", err)
		}
	})
}
