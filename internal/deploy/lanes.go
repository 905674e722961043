package deploy

import "time"

// LaneDispatchGrace is the dispatch grace of a lane whose worker has
// laneTimeout and its event source laneWindow, in a deployment whose
// default lane's worker has defaultTimeout and whose dispatch grace is
// grace: the default lane's margin over its timeout, added to the lane's
// timeout and window (never less than grace), so the sweeper does not
// re-send a job whose message waits in a long run's batch. The construct
// and the local stack both set JOBS_LANE_DISPATCH_GRACES from it.
func LaneDispatchGrace(grace, defaultTimeout, laneTimeout, laneWindow time.Duration) time.Duration {
	return max(grace, laneTimeout+laneWindow+grace-defaultTimeout)
}
