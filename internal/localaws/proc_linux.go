package localaws

import "syscall"

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
