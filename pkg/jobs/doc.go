// Package jobs is a background-job system for Go teams that runs entirely
// on AWS serverless parts: API Gateway and Lambda in front, DynamoDB for the
// jobs, SQS to hand them to workers.
//
// # Kinds
//
// A kind is a name, a payload type P, a result type R and one handler, a
// plain function whose types Register infers. Register every kind at
// start-up, in every function (enqueue validates payloads with it, the
// worker runs it):
//
//	func sendEmail(ctx context.Context, job *jobs.Job[EmailPayload]) (jobs.NoResult, error)
//
//	reg := jobs.NewRegistry()
//	emails := jobs.MustRegister(reg, "email.send", sendEmail,
//		&jobs.KindOpts{FailureCodes: []string{"bounced", "rate_limited"}})
//
// Registering returns the kind's typed handle, which enqueues from Go with
// the payload type checked by the compiler:
//
//	res, err := emails.Enqueue(ctx, svc, owner, EmailPayload{To: "ada@example.com"},
//		&jobs.EnqueueOpts{IdempotencyKey: "welcome-42"})
//
// Enqueue refuses an unknown kind and a payload that does not decode into P
// (unknown fields, duplicate keys, null, too deep or too large are all
// refused), and stores nothing when it refuses: its error matches
// [ErrInvalidRequest] and says why in words safe to return to the caller.
// [KindOpts] and [EnqueueOpts] hold every option of a kind and of an
// enqueue.
//
// # Results and failures
//
// A result says what of it is public through [Result.PublicJSON]; only those
// bytes are stored and returned. A handler fails its job with [Fail] and a
// code it declared; any other error, a panic, an undeclared code or an
// invalid result becomes the reserved [CodeInternal]. Error text is never
// stored, returned or logged: logs name the failing error's Go types only.
// While it runs, a handler may publish partial results with [Job.Publish].
//
// A panic in the handler's own goroutine becomes CodeInternal; a panic in a
// goroutine the handler starts itself is beyond any recover of the worker
// and crashes the invocation, its value printed by the Go runtime (which
// may quote a secret). Recover in the goroutines you start and return an
// error to the handler instead:
//
//	go func() {
//		defer func() {
//			if recover() != nil {
//				errs <- errors.New("resize panicked")
//			}
//		}()
//		errs <- resize(ctx, img)
//	}()
//
// # States
//
// A job is queued, running, succeeded, failed or cancelled. Every change is
// one conditional write in the store (package driver's Store): a claim moves queued to running and
// stamps a claim token; every later write of that run is conditional on
// status = running and that token, so a stale or duplicate worker can never
// overwrite a newer outcome. docs/reference/STATE_MACHINE.md draws it.
//
// # Delivery and deadlines
//
// SQS delivers at least once; the [Worker] claims each job before running
// it, so a duplicate runs nothing. The handler's context ends a reserve
// before the Lambda deadline ([Deadlines]); the final write has its own
// bounded context; a handler that ignores its context is abandoned and its
// job fails with [CodeTimedOut]. A final write that cannot land in time
// leaves the job running and returns its message for redelivery.
//
// # Nothing lost
//
// Enqueue writes the job (with a sweep time) before sending its reference.
// The [Sweeper] reads a sparse index of unfinished jobs past their sweep
// time: it re-sends queued jobs whose message never arrived and fails as
// [CodeInterrupted] running jobs whose lease ended.
//
// # Events and follow-ups
//
// A kind with KindOpts.Events announces each outcome on the deployment's
// event bus as an [Event] whose id (job id and outcome sequence) is stable
// across deliveries: once per outcome, delivered at least once, the
// sweeper sending what a dead worker could not. KindOpts.OnFailure
// enqueues a follow-up kind, once per failed outcome, with a [FailedJob].
// docs/reference/EVENTS.md has the rules and the costs.
//
// EnqueueOpts.After makes a job wait until the jobs it names have all
// succeeded; if one fails or is cancelled, it ends cancelled with
// [CodeDependencyFailed]. [Service.Replay] makes a new job from an old
// one. docs/guide/DEPENDENCIES.md has the rules.
//
// # One runtime
//
// Config is the whole configuration, and NewClient builds from it a Client
// whose roles are the Service (enqueue, read, cancel), the Worker (the
// worker Lambda's handler), the Sweeper and the ScheduleService: roles
// built from one Config agree on the dispatch grace, the retention, the
// events and the sealer by construction.
//
//	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: queue})
//	res, err := emails.Enqueue(ctx, c.Service(), owner, EmailPayload{To: "ada@example.com"}, nil)
//
// # Packages
//
// lambdafn builds each Lambda function's Client from its environment and,
// with lambdafn.NewService, enqueues from a team's other code; jobstest runs what was enqueued in a team's tests
// (Runner); httpapi maps API Gateway requests. driver is the contract of the
// parts jobs drives, which dynamostore (DynamoDB), sqsqueue (SQS),
// schedulerapi (EventBridge Scheduler) and eventbus (EventBridge)
// implement.
package jobs
