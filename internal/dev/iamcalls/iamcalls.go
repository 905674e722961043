// Package iamcalls records the AWS calls the local stack's principals make,
// as the IAM actions and resources AWS authorises them against, so a test of
// the CDK app (infra/) can evaluate each one against the policies it
// deploys. The emulators accept every call; AWS does not.
//
// Each local function signs with an access key id of its own (its name, see
// Principal), so a call is attributed to the function that made it, as AWS
// attributes it to the function's role. A Proxy in front of DynamoDB Local
// and the SQS emulator reads each request's operation and body and maps it
// to the actions AWS checks (Map): a TransactWriteItems is authorised item
// by item, a Query on an index against the index's ARN, a SendMessageBatch
// as sqs:SendMessage. Resources are recorded by what they are in the
// deployment ("table", "table/index/sweep", "queue", "dlq"), not by their
// local names, so infra can resolve them to the template's ARNs.
//
// Calls are written as JSON lines, each distinct call once per Recorder,
// to a file of their own in the directory named by the environment
// variable RecordDirEnv (make test sets it; make infra-test evaluates it).
package iamcalls

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RecordDirEnv names the directory the local stack records its calls to
// when set.
const RecordDirEnv = "LAMBDAJOBS_IAM_CALLS"

// Call is one authorisation AWS makes: a principal performing an action on
// a resource, with the request context keys that policies may test.
type Call struct {
	// Principal is who signed: a function's name, or one of the other
	// principals below.
	Principal string `json:"principal"`
	// Action is the IAM action, such as "dynamodb:PutItem".
	Action string `json:"action"`
	// Resource is what the action is on, as the deployment names it:
	// "table", "table/index/NAME", "queue", "dlq", "schedule/GROUP/*"
	// (GROUP "runtime" or "declared"), "role/scheduler", "route/METHOD PATH"
	// (PATH with its parameters as API Gateway's route key has them).
	Resource string `json:"resource"`
	// Context holds request context keys, such as
	// dynamodb:EnclosingOperation or iam:PassedToService.
	Context map[string]string `json:"context,omitempty"`
}

// key identifies a distinct call (encoding/json sorts the context's keys).
func (c Call) key() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// The principals besides the functions (whose principal is their name,
// as deploy.Functions names them).
const (
	// Scheduler is EventBridge Scheduler's role, sending fires.
	Scheduler = "scheduler"
	// Enqueuer is a function of the team's own given GrantEnqueue.
	Enqueuer = "enqueuer"
	// Caller is an API caller given the construct's GrantInvoke.
	Caller = "caller"
	// Operator is an API caller given GrantOperate.
	Operator = "operator"
	// Harness is the test harness and the local stack's own set-up (table,
	// queues, assertions): not a deployed principal, never recorded.
	Harness = "local"
)

var principalPattern = regexp.MustCompile(`^[a-z]{1,32}$`)

// AccessKeyID is the access key id a principal signs with locally: its
// name (DynamoDB Local accepts only letters and digits in it).
// LaneWorker is the principal of the worker of lane: "worker" and the
// lane's letters (a lane's worker is its own function, with its own role).
func LaneWorker(lane string) string {
	return "worker" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r
		}
		return -1
	}, lane)
}

func AccessKeyID(principal string) string {
	if !principalPattern.MatchString(principal) {
		panic(fmt.Sprintf("iamcalls: principal %q: want 1-32 lower-case letters", principal))
	}
	return principal
}

// Recorder keeps the distinct calls it is given and appends each new one
// to its file. A nil *Recorder records nothing.
type Recorder struct {
	mu   sync.Mutex
	seen map[string]Call
	f    *os.File
	w    *bufio.Writer
	err  error
}

var files atomic.Int64

// NewRecorder returns a Recorder writing to a new file in dir (created if
// needed).
func NewRecorder(dir string) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("calls-%d-%d-%d.jsonl", os.Getpid(), time.Now().UnixNano(), files.Add(1))
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &Recorder{seen: map[string]Call{}, f: f, w: bufio.NewWriter(f)}, nil
}

// Record adds calls; those of the Harness are dropped.
func (r *Recorder) Record(calls ...Call) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range calls {
		if c.Principal == Harness || c.Principal == "" {
			continue
		}
		k := c.key()
		if _, ok := r.seen[k]; ok {
			continue
		}
		r.seen[k] = c
		_, err := r.w.WriteString(k + "\n")
		if err == nil {
			err = r.w.Flush()
		}
		if err != nil && r.err == nil {
			r.err = err
		}
	}
}

// Calls returns the distinct calls recorded so far.
func (r *Recorder) Calls() []Call {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return sorted(r.seen)
}

func sorted(m map[string]Call) []Call {
	out := make([]Call, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Call) int { return strings.Compare(a.key(), b.key()) })
	return out
}

// Close flushes and closes the file, returning the first write error.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Flush(); err != nil && r.err == nil {
		r.err = err
	}
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = err
	}
	return r.err
}

// Load reads every call recorded in dir's files, each distinct call once.
func Load(dir string) ([]Call, error) {
	files, err := filepath.Glob(filepath.Join(dir, "calls-*.jsonl"))
	if err != nil {
		return nil, err
	}
	seen := map[string]Call{}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			var c Call
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			seen[c.key()] = c
		}
	}
	return sorted(seen), nil
}
