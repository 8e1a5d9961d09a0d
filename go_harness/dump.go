package main

import (
	"regexp"
	"strings"
)

var dumpHeaderRe = regexp.MustCompile(`(?m)^goroutine \d+ \[([^\]]*)\]:$`)

// blockedDumpState reports whether a goroutine-dump state ("chan receive",
// "select", "sync.Mutex.Lock", "chan send (nil chan)", "sync.WaitGroup.Wait,
// 2 minutes", …) is one that only another goroutine can end.
func blockedDumpState(state string) bool {
	state, _, _ = strings.Cut(state, ",")
	for _, p := range []string{"chan ", "select", "sync.", "semacquire"} {
		if strings.HasPrefix(state, p) {
			return true
		}
	}
	return false
}

// dumpAllBlocked decides "deadlock" from a goroutine dump (runtime.Stack(all)
// from the watchdog, or the testing alarm's traceback), for runs whose trace
// was not read to the end. A goroutine is the program's when one of its
// frames is user code (the harness's watchdog, its object helpers and a test
// binary's generated main excluded); it reports whether
// at least one such goroutine exists and all of them are blocked.
func dumpAllBlocked(dump string) bool {
	locs := dumpHeaderRe.FindAllStringSubmatchIndex(dump, -1)
	found := false
	for i, loc := range locs {
		end := len(dump)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if !userGoroutine(dump[loc[1]:end]) {
			continue
		}
		found = true
		if !blockedDumpState(dump[loc[2]:loc[3]]) {
			return false
		}
	}
	return found
}

// userGoroutine reports whether a dumped stack has a user frame. Frame lines
// are the unindented "pkg.Func(args)" lines; "created by" lines name the
// creator, not a frame of this goroutine.
func userGoroutine(stack string) bool {
	if strings.Contains(stack, "_testmain.go:") {
		return false // the test binary's main goroutine (testing.(*M).Run)
	}
	for _, line := range strings.Split(stack, "\n") {
		if line == "" || line[0] == '\t' || strings.HasPrefix(line, "created by ") {
			continue
		}
		fn := line
		if i := strings.LastIndexByte(fn, '('); i > 0 {
			fn = fn[:i]
		}
		if strings.Contains(fn, "_tracegenWatchdog") {
			return false // the harness's watchdog
		}
		if strings.Contains(fn, "._tracegen") {
			continue // the object helpers of rewrite.go: the caller's frame decides
		}
		if isUserFunc(fn) {
			return true
		}
	}
	return false
}
