package localaws

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ChildAttr puts a child in its own process group (so Stop can end it and
// its children together) and has the kernel kill it if this process dies.
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// DieWithParent asks the kernel to send this process SIGTERM when its
// parent exits, so a local stack never outlives the make or shell that
// started it.
func DieWithParent() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0)
}

// KillTree sends SIGKILL to pid and every process descended from it (found
// through /proc), children first, so a process that put its children in
// their own groups still takes them down with it.
func KillTree(pid int) {
	for _, child := range children(pid) {
		KillTree(child)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) > 1 {
			if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == pid {
				out = append(out, p)
			}
		}
	}
	return out
}
