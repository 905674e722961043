package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
)

// A script starts lambdajobs-local in the background (`lambdajobs-local &`,
// so it starts with SIGINT ignored, as POSIX shells start background jobs),
// signals the process it started ($!) and waits for it. However it was
// started, the signal must stop it and everything it started, promptly:
// no process it started is left and its ports are free. `go run` is the one
// start that cannot stop on SIGINT (it does not pass SIGINT on:
// go.dev/issue/40467): it stops on SIGTERM, and lambdajobs-local says so
// when go run starts it.
func TestStopsOnASignalHoweverStarted(t *testing.T) {
	dir := scriptDir(t)
	bin := filepath.Join(dir, "lambdajobs-local")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	const pkg = "github.com/lambdajobs/lambdajobs/cmd/lambdajobs-local"
	for _, tc := range []struct {
		name     string
		argv     []string
		sig      syscall.Signal
		starting bool   // signal as soon as its first emulator runs
		wantExit string // the script's `wait` status; empty: any
		wantLog  []string
		notLog   []string
	}{
		{name: "a built binary, SIGINT", argv: []string{bin}, sig: syscall.SIGINT, wantExit: "0", wantLog: []string{"stopped\n"}, notLog: []string{"go.dev/issue/40467"}},
		{name: "a built binary, SIGTERM", argv: []string{bin}, sig: syscall.SIGTERM, wantExit: "0", wantLog: []string{"stopped\n"}},
		{name: "a built binary, SIGINT while it starts", argv: []string{bin}, sig: syscall.SIGINT, starting: true, wantExit: "1", wantLog: []string{errInterrupted.Error()}},
		{name: "go tool, SIGINT", argv: []string{"go", "tool", "lambdajobs-local"}, sig: syscall.SIGINT, wantExit: "0", wantLog: []string{"stopped\n"}, notLog: []string{"go.dev/issue/40467"}},
		// go run dies of SIGTERM (exit 143) at once; the parent-death
		// signal stops lambdajobs-local, which stops the rest.
		{name: "go run, SIGTERM", argv: []string{"go", "run", pkg}, sig: syscall.SIGTERM, wantLog: []string{"go.dev/issue/40467", "stopped\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A port picked free may be taken before it is bound (by an
			// outgoing connection of another test, from the same
			// ephemeral range): such a start is tried again on others.
			var ports map[string]int
			var pid int
			var lines chan string
			var started []int
			var logPath string
			for try := 1; ; try++ {
				var busy bool
				ports, pid, lines, started, logPath, busy = launch(t, dir, tc.argv, tc.starting)
				if !busy {
					break
				}
				if try == 3 {
					t.Fatal("its ports were taken before it bound them, three times")
				}
				t.Logf("a port was taken before it was bound: again on others")
			}
			deadline := time.Now().Add(4 * time.Minute)
			if !tc.starting {
				// A job runs while the signal comes (its bootstrap starts
				// at the first invoke).
				api := "http://127.0.0.1:" + strconv.Itoa(ports["api"])
				enqueue, _ := deploy.RouteByID(deploy.RouteEnqueue)
				resp, err := http.Post(api+enqueue.Path, "application/json", strings.NewReader(`{"kind":"example.sleep","payload":{"ms":20000,"steps":1}}`))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Fatalf("enqueue: %s", resp.Status)
				}
				for !slices.ContainsFunc(started, func(p int) bool { return comm(p) == "bootstrap" && state(p) != "Z" }) {
					if time.Now().After(deadline) {
						t.Fatal("no worker ran the job")
					}
					time.Sleep(100 * time.Millisecond)
					started = descendants(pid)
				}
				var names []string
				for _, p := range started {
					names = append(names, comm(p))
				}
				for _, want := range []string{"java", "node", "aws-lambda-rie", "bootstrap"} {
					if !slices.Contains(names, want) {
						t.Fatalf("started %v, no %s among them", names, want)
					}
				}
			}

			if err := syscall.Kill(pid, tc.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case status := <-lines:
				if tc.wantExit != "" && status != tc.wantExit {
					t.Errorf("exit status %s, want %s", status, tc.wantExit)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("still running 30s after %v", tc.sig)
			}
			// Everything it started has exited (a zombie, left to an init
			// that does not reap, has exited too).
			deadline = time.Now().Add(15 * time.Second)
			for {
				var left []string
				for _, p := range started {
					if st := state(p); st != "" && st != "Z" {
						left = append(left, fmt.Sprintf("%d %s", p, comm(p)))
					}
				}
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("left running 15s after the script's wait returned: %v", left)
				}
				time.Sleep(100 * time.Millisecond)
			}
			for name, p := range ports {
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
				if err != nil {
					t.Errorf("%s port %d still bound: %v", name, p, err)
					continue
				}
				l.Close()
			}
			b, _ := os.ReadFile(logPath)
			for _, want := range tc.wantLog {
				if !strings.Contains(string(b), want) {
					t.Errorf("its output has no %q", want)
				}
			}
			for _, not := range tc.notLog {
				if strings.Contains(string(b), not) {
					t.Errorf("its output has %q", not)
				}
			}
		})
	}
}

// launch starts the script on free ports and waits until lambdajobs-local
// runs (starting: until its first emulator does). It answers the ports,
// the pid the script started, the script's output lines, what it started
// and its log; busy when it exited because a port was taken before it
// bound it (the caller tries again).
func launch(t *testing.T, dir string, argv []string, starting bool) (map[string]int, int, chan string, []int, string, bool) {
	t.Helper()
	ports := map[string]int{}
	for _, name := range []string{"JOBS_LOCAL_DYNAMODB_PORT", "JOBS_LOCAL_SQS_PORT", "api", "dashboard"} {
		p, err := localaws.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[name] = p
	}
	logPath := filepath.Join(t.TempDir(), "log")
	script := exec.Command("sh", "-c", `"$@" >"$LOG" 2>&1 & echo "$!"; wait "$!"; echo "$?"`, "sh")
	script.Args = append(script.Args, argv...)
	script.Dir = dir
	script.Env = append(os.Environ(), "LOG="+logPath,
		"JOBS_LOCAL_API_ADDR=127.0.0.1:"+strconv.Itoa(ports["api"]),
		"JOBS_LOCAL_DASHBOARD_ADDR=127.0.0.1:"+strconv.Itoa(ports["dashboard"]),
		"JOBS_LOCAL_DYNAMODB_PORT="+strconv.Itoa(ports["JOBS_LOCAL_DYNAMODB_PORT"]),
		"JOBS_LOCAL_SQS_PORT="+strconv.Itoa(ports["JOBS_LOCAL_SQS_PORT"]),
		"JOBS_LOCAL_SWEEP_EVERY=0s")
	script.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := script.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := script.Start(); err != nil {
		t.Fatal(err)
	}
	busy := false
	t.Cleanup(func() {
		localaws.KillTree(script.Process.Pid)
		_ = script.Wait()
		if t.Failed() && !busy {
			b, _ := os.ReadFile(logPath)
			t.Logf("its output:\n%s", b)
		}
	})
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	pid, err := strconv.Atoi(<-lines)
	if err != nil {
		t.Fatalf("the script's $!: %v", err)
	}
	// What it started, once it runs (or, for a signal during the start,
	// once its first emulator runs).
	deadline := time.Now().Add(4 * time.Minute)
	for {
		started := descendants(pid)
		if starting && slices.ContainsFunc(started, func(p int) bool { return comm(p) == "java" }) {
			return ports, pid, lines, started, logPath, false
		}
		b, _ := os.ReadFile(logPath)
		if !starting && strings.Contains(string(b), "lambdajobs is running") {
			return ports, pid, lines, started, logPath, false
		}
		select {
		case status := <-lines:
			if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "address already in use") {
				busy = true
				localaws.KillTree(script.Process.Pid)
				return nil, 0, nil, nil, "", true
			}
			t.Fatalf("exited (%s) before it was ready", status)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("not started after 4 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scriptDir makes the folder a script runs lambdajobs-local in, as `make
// run` does: the bootstraps in build/local, the Runtime Interface Emulator
// in bin/, the emulators in _tools; and a module of its own that requires
// this one (replaced by this checkout) with lambdajobs-local as a tool.
func scriptDir(t *testing.T) string {
	t.Helper()
	root, err := localaws.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie := os.Getenv("JOBS_TEST_RIE")
	if rie == "" {
		rie = filepath.Join(root, "bin", "aws-lambda-rie")
	}
	if _, err := os.Stat(rie); err != nil {
		t.Fatalf("the AWS Lambda Runtime Interface Emulator is required at %s (make test installs it: make bin/aws-lambda-rie): %v", rie, err)
	}
	dir := t.TempDir()
	if err := localstack.BuildBootstraps(root, filepath.Join(dir, "build", "local")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"bin/aws-lambda-rie": rie, "_tools": filepath.Join(root, "_tools")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	gomod := fmt.Sprintf(`module example.com/script

go 1.26.0

require github.com/lambdajobs/lambdajobs v0.0.0

replace github.com/lambdajobs/lambdajobs => %s

tool github.com/lambdajobs/lambdajobs/cmd/lambdajobs-local
`, root)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir = dir
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	return dir
}

// descendants lists the processes descended from pid, from /proc.
func descendants(pid int) []int {
	parents := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := stat(p, 1); ok {
			pp, _ := strconv.Atoi(ppid)
			parents[pp] = append(parents[pp], p)
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range parents[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

// state is a process's state letter (R, S, Z...), empty once it is gone.
func state(pid int) string {
	s, _ := stat(pid, 0)
	return s
}

// stat returns the field after the command name in /proc/PID/stat: 0 is
// the state, 1 the parent's pid.
func stat(pid, field int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) <= field {
		return "", false
	}
	return fields[field], true
}

// comm is a process's command name.
func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}
