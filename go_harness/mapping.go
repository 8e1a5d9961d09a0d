package main

import "golang.org/x/exp/trace"

// transitionEvent maps a goroutine state transition to an event name and reason.
// Status records (from Undetermined, or X->X) never reach it.
func transitionEvent(from, to trace.GoState, reason string) (string, string) {
	switch {
	case from == trace.GoNotExist:
		switch to {
		case trace.GoWaiting:
			return "GoCreate", "created blocked"
		case trace.GoSyscall:
			return "GoCreate", "created in syscall"
		}
		return "GoCreate", ""
	case to == trace.GoNotExist:
		return "GoEnd", ""
	case from == trace.GoRunnable && to == trace.GoRunning:
		return "GoStart", ""
	case from == trace.GoRunning && to == trace.GoWaiting:
		return "GoBlock", reason
	case from == trace.GoWaiting && to == trace.GoRunnable:
		return "GoUnblock", ""
	case from == trace.GoRunning && to == trace.GoRunnable:
		return "GoSched", reason
	case from == trace.GoRunning && to == trace.GoSyscall:
		return "GoSyscall", "enter"
	case from == trace.GoSyscall && to == trace.GoRunning:
		return "GoSyscall", "exit"
	case from == trace.GoSyscall && to == trace.GoRunnable:
		return "GoSyscall", "exit blocked"
	}
	return "GoTransition", from.String() + "->" + to.String()
}
