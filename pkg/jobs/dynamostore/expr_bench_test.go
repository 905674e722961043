package dynamostore

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// The claim's expressions, as the store writes them (expr) and as the
// SDK's expression.Builder would write the same update and condition: the
// one place where a benchmark decides between the two (the worker writes
// a claim and a final write per job; docs/evidence/BENCHMARKS.md, "Expressions").
//
//	go test -run '^$' -bench ClaimExpression -benchmem ./pkg/jobs/dynamostore/
func BenchmarkClaimExpression(b *testing.B) {
	at, lease := time.UnixMilli(1_767_000_000_000), time.UnixMilli(1_767_000_060_000)
	b.Run("expr", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e := newExpr()
			t := e.vn(ms(at))
			e.setTo(attrStatus, e.vs(string(jobs.StatusRunning)))
			e.moveUnfinished(AttrRunning, AttrQueued)
			e.setTo(attrToken, e.vs("token-0123456789"))
			e.setTo(attrLease, e.vn(ms(lease)))
			e.setTo(attrStarted, t)
			e.setTo(attrFirstStarted, e.ifNotExists(attrFirstStarted, t))
			e.setTo(attrUpdated, t)
			e.del(attrWaitingOn)
			e.addTo(attrAttempt, 1)
			e.when(e.statusIs(jobs.StatusQueued))
			e.when(e.notExists(attrRunAt) + " OR " + e.n(attrRunAt) + " <= " + t)
			e.when(e.notExists(attrWaitingOn) + " OR " + e.n(attrWaitingOn) + " <> " + e.vs(driver.WaitParents))
			_, _ = e.update(), e.condition()
		}
	})
	b.Run("sdk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			t := expression.Value(ms(at))
			upd := expression.Set(expression.Name(attrStatus), expression.Value(string(jobs.StatusRunning))).
				Set(expression.Name(AttrRunning), expression.IfNotExists(expression.Name(AttrListOwner), expression.Value("-"))).
				Remove(expression.Name(AttrQueued)).
				Set(expression.Name(attrToken), expression.Value("token-0123456789")).
				Set(expression.Name(attrLease), expression.Value(ms(lease))).
				Set(expression.Name(attrStarted), t).
				Set(expression.Name(attrFirstStarted), expression.IfNotExists(expression.Name(attrFirstStarted), t)).
				Set(expression.Name(attrUpdated), t).
				Remove(expression.Name(attrWaitingOn)).
				Add(expression.Name(attrAttempt), expression.Value(1))
			cond := expression.Name(attrStatus).Equal(expression.Value(string(jobs.StatusQueued))).
				And(expression.AttributeNotExists(expression.Name(attrRunAt)).Or(expression.Name(attrRunAt).LessThanEqual(t))).
				And(expression.AttributeNotExists(expression.Name(attrWaitingOn)).Or(expression.Name(attrWaitingOn).NotEqual(expression.Value(driver.WaitParents))))
			if _, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
