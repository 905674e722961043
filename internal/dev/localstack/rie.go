package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
)

// Function is one Lambda function run by the AWS Lambda Runtime Interface
// Emulator: the real bootstrap binary under the real Runtime API, with the
// configured timeout enforced. The emulator crashes when invoked twice at
// once, so Invoke serializes calls on each instance.
type Function struct {
	Name     string
	endpoint string
	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{}
	once     sync.Once
	cfg      FunctionConfig
	stopped  bool
	pmu      sync.Mutex // guards cmd for Kill
	// Restarts counts the times a dead instance was replaced.
	Restarts int
}

// FunctionConfig says how to start a function under the emulator.
type FunctionConfig struct {
	Name      string        // the function's name (AWS_LAMBDA_FUNCTION_NAME)
	RIE       string        // path to aws-lambda-rie
	Bootstrap string        // path to the bootstrap binary
	Timeout   time.Duration // the function timeout
	Env       []string      // the function's environment (KEY=VALUE)
	Output    io.Writer     // receives the emulator's and the function's output
}

// StartFunction starts the emulator on free loopback ports and waits until
// it accepts connections.
func StartFunction(ctx context.Context, c FunctionConfig) (*Function, error) {
	f := &Function{Name: c.Name, cfg: c}
	if err := f.start(ctx); err != nil {
		return nil, err
	}
	return f, nil
}

// start launches the emulator and the bootstrap on fresh ports. A port
// picked free can be taken by another process before the emulator binds
// it (tests start stacks side by side): an emulator that exits at start
// is started again on other ports, up to three times.
func (f *Function) start(ctx context.Context) error {
	var err error
	for try := 0; try < 3; try++ {
		if err = f.startOnce(ctx); !errors.Is(err, errExitedAtStart) {
			return err
		}
	}
	return err
}

// errExitedAtStart: the emulator's process ended before it listened.
var errExitedAtStart = errors.New("the runtime interface emulator exited at start")

// startOnce is one try of start.
func (f *Function) startOnce(ctx context.Context) error {
	c := f.cfg
	emuPort, err := localaws.FreePort()
	if err != nil {
		return err
	}
	apiPort, err := localaws.FreePort()
	if err != nil {
		return err
	}
	secs := int((c.Timeout + time.Second - 1) / time.Second)
	cmd := exec.Command(c.RIE,
		"--runtime-interface-emulator-address", "127.0.0.1:"+strconv.Itoa(emuPort),
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(apiPort),
		c.Bootstrap)
	cmd.Env = append(append(os.Environ(), c.Env...),
		"AWS_LAMBDA_FUNCTION_NAME="+c.Name,
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(secs),
		"AWS_LAMBDA_LOG_FORMAT=JSON",
	)
	out := c.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = localaws.ChildAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s under the runtime interface emulator: %w", c.Name, err)
	}
	done := make(chan struct{})
	f.endpoint = "http://127.0.0.1:" + strconv.Itoa(emuPort) + "/2015-03-31/functions/function/invocations"
	f.pmu.Lock()
	f.cmd, f.done = cmd, done
	f.pmu.Unlock()
	go func() { _ = cmd.Wait(); close(done) }()
	if err := f.waitReady(ctx, emuPort); err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return err
	}
	return nil
}

func (f *Function) waitReady(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-f.done:
			return fmt.Errorf("%s: %w", f.Name, errExitedAtStart)
		case <-ctx.Done():
			return fmt.Errorf("%s: the runtime interface emulator did not start: %w", f.Name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ErrFunction is returned when the function itself failed: it returned an
// error, panicked, or timed out.
var ErrFunction = errors.New("function error")

// Invoke sends payload to the function and returns its answer.
//
// An instance whose process died (it was killed, or crashed) is replaced by
// a fresh one first, as Lambda replaces a dead execution environment.
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.done:
		if f.stopped {
			return nil, fmt.Errorf("%s: stopped", f.Name)
		}
		if err := f.start(ctx); err != nil {
			return nil, err
		}
		f.Restarts++
	default:
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.endpoint, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", f.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", f.Name, err)
	}
	if strings.HasPrefix(string(body), "Task timed out") {
		return nil, fmt.Errorf("%w: %s timed out", ErrFunction, f.Name)
	}
	var fe struct {
		ErrorType    *string `json:"errorType"`
		ErrorMessage *string `json:"errorMessage"`
	}
	if resp.StatusCode != http.StatusOK || (json.Unmarshal(body, &fe) == nil && fe.ErrorType != nil && fe.ErrorMessage != nil) {
		return nil, fmt.Errorf("%w: %s failed (HTTP %d)", ErrFunction, f.Name, resp.StatusCode)
	}
	return body, nil
}

// Stop ends the emulator and the function's process.
func (f *Function) Stop() {
	f.once.Do(func() {
		f.mu.Lock()
		f.stopped = true
		f.mu.Unlock()
		_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-f.done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
			<-f.done
		}
	})
}

// Kill sends SIGKILL to the emulator and its function at once, as when a
// Lambda execution environment dies mid-invoke, and returns once the
// emulator has exited: nothing of the instance runs on after it (a
// request it had in flight is never retried). The next Invoke starts a
// fresh instance.
func (f *Function) Kill() {
	f.pmu.Lock()
	localaws.KillTree(f.cmd.Process.Pid)
	_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
	done := f.done
	f.pmu.Unlock()
	<-done
}
