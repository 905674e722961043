// gatedStore's methods, one per driver.Store method and optional
// interface (the var block in store.go makes the compiler check the set):
// each waits for the scheduler's turn, then calls the MemStore.

package simulation

import (
	"context"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

func (s *gatedStore) Create(ctx context.Context, rec *driver.Record) error {
	return s.a.do(ctx, "Create", rec.ID, func() error {
		err := s.st.Create(ctx, rec)
		if err == nil {
			s.a.w.checkFirePaused(rec.ID)
		}
		return err
	})
}

func (s *gatedStore) Get(ctx context.Context, id string) (*driver.Record, error) {
	var r0 *driver.Record
	err := s.a.do(ctx, "Get", id, func() (err error) {
		r0, err = s.st.Get(ctx, id)
		return err
	})
	return r0, err
}

func (s *gatedStore) GetMany(ctx context.Context, ids []string) (map[string]*driver.Record, error) {
	var r0 map[string]*driver.Record
	err := s.a.do(ctx, "GetMany", "", func() (err error) {
		r0, err = s.st.GetMany(ctx, ids)
		return err
	})
	return r0, err
}

func (s *gatedStore) Claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	var r0 *driver.Record
	err := s.a.do(ctx, "Claim", id, func() (err error) {
		r0, err = s.claim(ctx, id, c)
		return err
	})
	return r0, err
}

func (s *gatedStore) Publish(ctx context.Context, id, token string, result []byte, at time.Time) error {
	return s.a.do(ctx, "Publish", id, func() error { return s.st.Publish(ctx, id, token, result, at) })
}

func (s *gatedStore) Heartbeat(ctx context.Context, id, token string, hb driver.Heartbeat) error {
	return s.a.do(ctx, "Heartbeat", id, func() error { return s.st.Heartbeat(ctx, id, token, hb) })
}

func (s *gatedStore) Checkpoint(ctx context.Context, id, token string, c driver.Checkpoint) error {
	return s.a.do(ctx, "Checkpoint", id, func() error { return s.st.Checkpoint(ctx, id, token, c) })
}

func (s *gatedStore) AcquireSlot(ctx context.Context, key string, c driver.SlotClaim) (driver.SlotState, error) {
	var r0 driver.SlotState
	err := s.a.do(ctx, "AcquireSlot", key, func() (err error) {
		r0, err = s.st.AcquireSlot(ctx, key, c)
		return err
	})
	return r0, err
}

func (s *gatedStore) ReleaseSlot(ctx context.Context, key, holder string) (string, error) {
	var r0 string
	err := s.a.do(ctx, "ReleaseSlot", key, func() (err error) {
		r0, err = s.st.ReleaseSlot(ctx, key, holder)
		return err
	})
	return r0, err
}

func (s *gatedStore) TakeToken(ctx context.Context, key string, b driver.TokenBucket) (time.Duration, error) {
	var r0 time.Duration
	err := s.a.do(ctx, "TakeToken", key, func() (err error) {
		r0, err = s.st.TakeToken(ctx, key, b)
		return err
	})
	return r0, err
}

func (s *gatedStore) ClaimUnique(ctx context.Context, key string, u driver.UniqueClaim) (string, error) {
	var r0 string
	err := s.a.do(ctx, "ClaimUnique", key, func() (err error) {
		r0, err = s.st.ClaimUnique(ctx, key, u)
		return err
	})
	return r0, err
}

func (s *gatedStore) ReleaseUnique(ctx context.Context, key, jobID string) error {
	return s.a.do(ctx, "ReleaseUnique", key, func() error { return s.st.ReleaseUnique(ctx, key, jobID) })
}

func (s *gatedStore) Debounce(ctx context.Context, id string, d driver.Debounce) error {
	return s.a.do(ctx, "Debounce", id, func() error { return s.st.Debounce(ctx, id, d) })
}

func (s *gatedStore) Finish(ctx context.Context, id, token string, o driver.Outcome) error {
	return s.a.do(ctx, "Finish", id, func() error { return s.finish(ctx, id, token, o) })
}

func (s *gatedStore) DoneAfter(ctx context.Context, id string, of driver.AfterOf) error {
	return s.a.do(ctx, "DoneAfter", id, func() error { return s.st.DoneAfter(ctx, id, of) })
}

func (s *gatedStore) Requeue(ctx context.Context, id, token string, r driver.Requeue) error {
	return s.a.do(ctx, "Requeue", id, func() error { return s.requeue(ctx, id, token, r) })
}

func (s *gatedStore) Signal(ctx context.Context, id string, sg driver.Signal) error {
	return s.a.do(ctx, "Signal", id, func() error { return s.st.Signal(ctx, id, sg) })
}

func (s *gatedStore) CancelQueued(ctx context.Context, id string, c driver.CancelQueued) error {
	return s.a.do(ctx, "CancelQueued", id, func() error { return s.st.CancelQueued(ctx, id, c) })
}

func (s *gatedStore) CreateBatch(ctx context.Context, b *driver.Batch) (*driver.Batch, error) {
	var r0 *driver.Batch
	err := s.a.do(ctx, "CreateBatch", b.ID, func() (err error) {
		r0, err = s.st.CreateBatch(ctx, b)
		return err
	})
	return r0, err
}

func (s *gatedStore) OpenBatch(ctx context.Context, id string) error {
	return s.a.do(ctx, "OpenBatch", id, func() error { return s.st.OpenBatch(ctx, id) })
}

func (s *gatedStore) GetBatch(ctx context.Context, id string) (*driver.Batch, error) {
	var r0 *driver.Batch
	err := s.a.do(ctx, "GetBatch", id, func() (err error) {
		r0, err = s.st.GetBatch(ctx, id)
		return err
	})
	return r0, err
}

func (s *gatedStore) CountInBatch(ctx context.Context, b *driver.Batch, c driver.BatchCount) (driver.BatchShard, error) {
	var r0 driver.BatchShard
	err := s.a.do(ctx, "CountInBatch", b.ID, func() (err error) {
		r0, err = s.st.CountInBatch(ctx, b, c)
		return err
	})
	return r0, err
}

func (s *gatedStore) ShardDone(ctx context.Context, batchID string, shard int) (int, error) {
	var r0 int
	err := s.a.do(ctx, "ShardDone", batchID, func() (err error) {
		r0, err = s.st.ShardDone(ctx, batchID, shard)
		return err
	})
	return r0, err
}

func (s *gatedStore) CountBatch(ctx context.Context, b *driver.Batch) (*driver.Batch, error) {
	var r0 *driver.Batch
	err := s.a.do(ctx, "CountBatch", b.ID, func() (err error) {
		r0, err = s.st.CountBatch(ctx, b)
		return err
	})
	return r0, err
}

func (s *gatedStore) EndBatch(ctx context.Context, id string, status driver.Status, at, expiresAt time.Time) error {
	return s.a.do(ctx, "EndBatch", id, func() error { return s.st.EndBatch(ctx, id, status, at, expiresAt) })
}

func (s *gatedStore) RescheduleBatch(ctx context.Context, id string, at time.Time) error {
	return s.a.do(ctx, "RescheduleBatch", id, func() error { return s.st.RescheduleBatch(ctx, id, at) })
}

func (s *gatedStore) RequestCancel(ctx context.Context, id string, at time.Time) error {
	return s.a.do(ctx, "RequestCancel", id, func() error { return s.st.RequestCancel(ctx, id, at) })
}

func (s *gatedStore) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var r0 []string
	err := s.a.do(ctx, "Due", "", func() (err error) {
		r0, err = s.st.Due(ctx, now, limit)
		return err
	})
	return r0, err
}

func (s *gatedStore) Reschedule(ctx context.Context, id string, expect driver.Expect, at time.Time) error {
	return s.a.do(ctx, "Reschedule", id, func() error { return s.st.Reschedule(ctx, id, expect, at) })
}

func (s *gatedStore) LastFire(ctx context.Context, schedule string) (string, error) {
	var r0 string
	err := s.a.do(ctx, "LastFire", schedule, func() (err error) {
		r0, err = s.st.LastFire(ctx, schedule)
		return err
	})
	return r0, err
}

func (s *gatedStore) SetLastFire(ctx context.Context, schedule, prev, id string) error {
	return s.a.do(ctx, "SetLastFire", schedule, func() error { return s.st.SetLastFire(ctx, schedule, prev, id) })
}

func (s *gatedStore) OwnerSchedules(ctx context.Context, ownerKey string) ([]driver.Schedule, error) {
	var r0 []driver.Schedule
	err := s.a.do(ctx, "OwnerSchedules", ownerKey, func() (err error) {
		r0, err = s.st.OwnerSchedules(ctx, ownerKey)
		return err
	})
	return r0, err
}

func (s *gatedStore) AddOwnerSchedule(ctx context.Context, ownerKey string, sc driver.Schedule, max int) error {
	return s.a.do(ctx, "AddOwnerSchedule", ownerKey, func() error { return s.st.AddOwnerSchedule(ctx, ownerKey, sc, max) })
}

func (s *gatedStore) RemoveOwnerSchedule(ctx context.Context, ownerKey, name string) error {
	return s.a.do(ctx, "RemoveOwnerSchedule", ownerKey, func() error { return s.st.RemoveOwnerSchedule(ctx, ownerKey, name) })
}

func (s *gatedStore) List(ctx context.Context, q driver.ListQuery) (driver.ListPage, error) {
	var r0 driver.ListPage
	err := s.a.do(ctx, "List", q.OwnerKey, func() (err error) {
		r0, err = s.st.List(ctx, q)
		return err
	})
	return r0, err
}

func (s *gatedStore) CountUnfinished(ctx context.Context, ownerKey string, max int) (driver.UnfinishedCounts, error) {
	var r0 driver.UnfinishedCounts
	err := s.a.do(ctx, "CountUnfinished", ownerKey, func() (err error) {
		r0, err = s.st.CountUnfinished(ctx, ownerKey, max)
		return err
	})
	return r0, err
}

func (s *gatedStore) AddDependent(ctx context.Context, parentID string, d driver.DependentOf) (*driver.Record, error) {
	var r0 *driver.Record
	err := s.a.do(ctx, "AddDependent", parentID, func() (err error) {
		r0, err = s.st.AddDependent(ctx, parentID, d)
		return err
	})
	return r0, err
}

func (s *gatedStore) CountParents(ctx context.Context, id string, c driver.ParentCount) (*driver.Record, error) {
	var r0 *driver.Record
	err := s.a.do(ctx, "CountParents", id, func() (err error) {
		r0, err = s.st.CountParents(ctx, id, c)
		return err
	})
	return r0, err
}

func (s *gatedStore) ReleaseParents(ctx context.Context, id string, r driver.ReleaseParents) error {
	return s.a.do(ctx, "ReleaseParents", id, func() error { return s.st.ReleaseParents(ctx, id, r) })
}

func (s *gatedStore) Resubmit(ctx context.Context, id string, r driver.Resubmit) error {
	return s.a.do(ctx, "Resubmit", id, func() error { return s.st.Resubmit(ctx, id, r) })
}

func (s *gatedStore) CountQueued(ctx context.Context, q driver.QueueCount) (int, error) {
	var r0 int
	err := s.a.do(ctx, "CountQueued", q.Kind, func() (err error) {
		r0, err = s.st.CountQueued(ctx, q)
		return err
	})
	return r0, err
}

func (s *gatedStore) PopWaiter(ctx context.Context, key, holder string) (string, int, error) {
	var r0 string
	var r1 int
	err := s.a.do(ctx, "PopWaiter", key, func() (err error) {
		r0, r1, err = s.st.PopWaiter(ctx, key, holder)
		return err
	})
	return r0, r1, err
}

func (s *gatedStore) ReadPart(ctx context.Context, rec *driver.Record, p driver.Part) ([]byte, time.Time, error) {
	var r0 []byte
	var r1 time.Time
	err := s.a.do(ctx, "ReadPart "+string(p), rec.ID, func() (err error) {
		r0, r1, err = s.readPart(ctx, rec, p)
		return err
	})
	return r0, r1, err
}

func (s *gatedStore) KeepPart(ctx context.Context, rec *driver.Record, p driver.Part, until time.Time) error {
	return s.a.do(ctx, "KeepPart "+string(p), rec.ID, func() error { return s.st.KeepPart(ctx, rec, p, until) })
}

// StageResult takes a turn, and the store's faults, only when it writes
// an object: otherwise it is no call at all, as in dynamostore.
func (s *gatedStore) StageResult(ctx context.Context, id string, result []byte, until time.Time) (driver.Staged, error) {
	if over := s.a.w.objectsOver; over == 0 || len(result) <= over {
		return s.st.StageResult(ctx, id, result, until)
	}
	var r0 driver.Staged
	err := s.a.do(ctx, "StageResult", id, func() (err error) {
		r0, err = s.st.StageResult(ctx, id, result, until)
		return err
	})
	if err != nil {
		s.a.w.cover("mechanism", "result not written ahead: the run is interrupted")
	} else if r0.Ref != "" {
		s.a.w.cover("mechanism", "result written ahead as an object")
	}
	return r0, err
}

// StagePayload takes a turn and the store's faults: an uploaded payload
// written ahead of its job.
func (s *gatedStore) StagePayload(ctx context.Context, id string, payload []byte, until time.Time) (driver.Staged, error) {
	var r0 driver.Staged
	err := s.a.do(ctx, "StagePayload", id, func() (err error) {
		r0, err = s.st.StagePayload(ctx, id, payload, until)
		return err
	})
	return r0, err
}

// Uploads are the store's, each call taking a turn and the faults
// (driver.UploadKeeper); nil without the object tier.
func (s *gatedStore) Uploads() driver.Uploads {
	u := s.st.Uploads()
	if u == nil {
		return nil
	}
	return gatedUploads{a: s.a, u: u}
}

// gatedUploads are the uploads' store as an actor reaches it.
type gatedUploads struct {
	a *actor
	u driver.Uploads
}

func (g gatedUploads) Begin(ctx context.Context, key string, sizes []int, ttl time.Duration) (string, []string, error) {
	var r0 string
	var r1 []string
	err := g.a.do(ctx, "Upload begin", key, func() (err error) {
		r0, r1, err = g.u.Begin(ctx, key, sizes, ttl)
		return err
	})
	return r0, r1, err
}

func (g gatedUploads) Complete(ctx context.Context, key, id string, etags []string) error {
	return g.a.do(ctx, "Upload complete", key, func() error { return g.u.Complete(ctx, key, id, etags) })
}

func (g gatedUploads) Read(ctx context.Context, key string, max int) ([]byte, error) {
	var r0 []byte
	err := g.a.do(ctx, "Upload read", key, func() (err error) {
		r0, err = g.u.Read(ctx, key, max)
		return err
	})
	return r0, err
}

func (g gatedUploads) Abort(ctx context.Context, key, id string) error {
	return g.a.do(ctx, "Upload abort", key, func() error { return g.u.Abort(ctx, key, id) })
}

func (g gatedUploads) Remove(ctx context.Context, key string) error {
	return g.a.do(ctx, "Upload remove", key, func() error { return g.u.Remove(ctx, key) })
}
