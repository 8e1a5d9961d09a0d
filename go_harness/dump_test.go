package main

import (
	"testing"
	"time"
)

const deadDump = `goroutine 7 [running]:
main._tracegenWatchdog(0xb2d05e00)
	prog/0000_tracegen_watchdog.go:50 +0x55
created by main.init.0 in goroutine 1
	prog/0000_tracegen_watchdog.go:24 +0x8e

goroutine 1 [sync.WaitGroup.Wait, 2 minutes]:
sync.(*WaitGroup).Wait(0xc000012345)
	sync/waitgroup.go:118 +0x48
main.tracegenUserMain()
	prog/main.go:30 +0xf

goroutine 10 [trace reader (blocked)]:
runtime.ReadTrace()
	runtime/trace.go:893 +0x45

goroutine 11 [sync.Mutex.Lock]:
internal/sync.(*Mutex).lockSlow(0xc0000a)
	internal/sync/mutex.go:149 +0x15d
main.main.func1()
	prog/main.go:18 +0x56
created by main.tracegenUserMain in goroutine 1
	prog/main.go:14 +0x8b
`

func TestDumpAllBlocked(t *testing.T) {
	if !dumpAllBlocked(deadDump) {
		t.Fatal("deadlocked dump not recognised")
	}
	spinning := deadDump + "\ngoroutine 12 [runnable]:\nmain.spin()\n\tprog/main.go:40 +0x1\n"
	if dumpAllBlocked(spinning) {
		t.Fatal("a runnable program goroutine is not a deadlock")
	}
	testMain := "goroutine 1 [runnable]:\ntesting.(*M).Run(0x1)\n\ttesting/testing.go:2 +0x1\nmain.main()\n\t_testmain.go:46 +0x9b\n"
	if dumpAllBlocked(deadDump+"\n"+testMain) != true {
		t.Fatal("the test binary's main goroutine is not the program's")
	}
	sleeping := "goroutine 1 [sleep]:\ntime.Sleep(0x1)\n\truntime/time.go:1 +0x1\nmain.main()\n\tprog/main.go:3 +0x1\n"
	if dumpAllBlocked(sleeping) || dumpAllBlocked("") {
		t.Fatal("sleep / empty dump is not a deadlock")
	}
}

func TestTruncatedDeadlockUsesDump(t *testing.T) {
	p, work := prepare(t, "abba_deadlock", false)
	r := RunOnce(p, RunConfig{Runs: 1, Timeout: time.Second, MaxEvents: 3}, 0, work)
	if r.Status != "deadlock" || !r.Truncated || len(r.Events) != 3 {
		t.Fatalf("status %q truncated %v events %d", r.Status, r.Truncated, len(r.Events))
	}
	p, work = prepare(t, "spin_forever", false)
	r = RunOnce(p, RunConfig{Runs: 1, Timeout: time.Second, MaxEvents: 3}, 0, work)
	if r.Status != "timeout" || !r.Truncated {
		t.Fatalf("spinner: status %q truncated %v", r.Status, r.Truncated)
	}
}
