//go:build !linux

package localaws

import "syscall"

// ChildAttr puts a child in its own process group, so Stop can end it and
// its children together. (Outside Linux there is no parent-death signal:
// the emulators also exit when their standard input closes.)
func ChildAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// DieWithParent does nothing outside Linux.
func DieWithParent() {}

// KillTree sends SIGKILL to pid's process group.
func KillTree(pid int) { _ = syscall.Kill(-pid, syscall.SIGKILL) }
