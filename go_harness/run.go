package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// RunConfig holds the options of one `go_harness run` invocation.
type RunConfig struct {
	Runs       int
	Timeout    time.Duration
	GOMAXPROCS []int // cycled through by run index; empty: leave unset
	TestRegex  string
	MaxEvents  int
	KeepTraces bool // false: delete each trace (and stack dump) once parsed
}

// RunResult is one JSON line of `go_harness run`.
type RunResult struct {
	RunIndex    int                `json:"run_index"`
	Mode        Mode               `json:"mode"`
	Status      string             `json:"status"`
	ExitCode    int                `json:"exit_code"`
	DurationMs  int64              `json:"duration_ms"`
	GOMAXPROCS  *int               `json:"gomaxprocs"`
	TraceFile   string             `json:"trace_file"`
	TraceError  string             `json:"trace_error"`
	StderrTail  string             `json:"stderr_tail"`
	StdoutTail  string             `json:"stdout_tail"`
	Events      []Event            `json:"events"`
	Truncated   bool               `json:"truncated"`
	Goroutines  []GoroutineSummary `json:"goroutines"`
	Leaked      []LeakedGoroutine  `json:"leaked"`
	Generations int                `json:"generations"`
	// Instrumentation and RewriteError: how the program was built (Program).
	Instrumentation string `json:"instrumentation"`
	RewriteError    string `json:"rewrite_error"`
}

// exitWatchdog is the exit code of the injected watchdog (main packages).
const exitWatchdog = 124

// leakScanMaxBytes bounds the traces that a normally ended run reads past
// the event cap to find leaked goroutines (about 2 s of reading on a small
// machine); a larger truncated trace stops at the cap and its run is ok.
const leakScanMaxBytes = 32 << 20

// killGrace is how long after the in-process timeout the harness kills the
// process group: long enough for the watchdog / test alarm to stop and
// flush the trace first.
func killGrace(timeout time.Duration) time.Duration {
	return max(2*time.Second, timeout/2)
}

// RunOnce executes the built program once and classifies the outcome.
func RunOnce(p *Program, cfg RunConfig, index int, work string) RunResult {
	res := RunResult{RunIndex: index, Mode: p.Mode, Events: []Event{}, Goroutines: []GoroutineSummary{},
		Leaked: []LeakedGoroutine{}, Instrumentation: p.Instrumentation, RewriteError: p.RewriteError}
	traceFile := filepath.Join(work, fmt.Sprintf("run-%d.trace", index))
	stacksFile := filepath.Join(work, fmt.Sprintf("run-%d.stacks", index))
	os.Remove(traceFile)
	os.Remove(stacksFile)

	var cmd *exec.Cmd
	if p.Mode == ModeTest {
		cmd = exec.Command(p.Binary, "-test.trace="+traceFile, "-test.run="+cfg.TestRegex,
			"-test.timeout="+cfg.Timeout.String(), "-test.count=1")
	} else {
		cmd = exec.Command(p.Binary)
	}
	cmd.Dir = p.SrcDir
	cmd.Env = append(os.Environ(), "TRACEGEN_TRACE_FILE="+traceFile,
		"TRACEGEN_TIMEOUT="+cfg.Timeout.String(), "TRACEGEN_STACKS_FILE="+stacksFile)
	if _, ok := os.LookupEnv("GORACE"); !ok {
		// The race runtime otherwise sleeps 1s at exit after a report.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=50")
	}
	if len(cfg.GOMAXPROCS) > 0 {
		n := cfg.GOMAXPROCS[index%len(cfg.GOMAXPROCS)]
		res.GOMAXPROCS = &n
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMAXPROCS=%d", n))
	}
	stdout, stderr := newCapBuffer(64<<10), newCapBuffer(64<<10)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second

	start := time.Now()
	var killed atomic.Bool
	if err := cmd.Start(); err != nil {
		res.Status, res.ExitCode, res.StderrTail = "exit_error", -1, err.Error()
		return res
	}
	timer := time.AfterFunc(cfg.Timeout+killGrace(cfg.Timeout), func() {
		killed.Store(true)
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	err := cmd.Wait()
	timer.Stop()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of the group
	res.DurationMs = time.Since(start).Milliseconds()
	res.ExitCode = 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.ExitCode = ee.ExitCode() // -1 when killed by a signal
	} else if err != nil {
		res.ExitCode = -1
	}
	// Undo the main rename in panic tracebacks and goroutine dumps.
	res.StderrTail = strings.ReplaceAll(tailString(stderr.Tail(), 4000), "main."+userMainName, "main.main")
	res.StdoutTail = tailString(stdout.Tail(), 4000)

	timedOut := killed.Load() || (p.Mode == ModeMain && res.ExitCode == exitWatchdog) ||
		(p.Mode == ModeTest && strings.Contains(stderr.All(), "panic: test timed out after"))
	var parsed *ParseResult
	if fi, err := os.Stat(traceFile); err == nil && fi.Size() > 0 {
		res.TraceFile = traceFile
		opt := DefaultParseOptions()
		opt.Mode, opt.MaxEvents, opt.FilePrefix = p.Mode, cfg.MaxEvents, p.ModulePath+"/"
		// A run that ended normally is read to its end (past the cap, cheaply:
		// states only) so leaked goroutines are seen; any other run stops at
		// the cap: reading a long trace to its end costs seconds.
		opt.StopAtCap = timedOut || res.ExitCode != 0 || fi.Size() > leakScanMaxBytes
		parsed = parseFile(traceFile, opt)
		res.Events, res.Truncated, res.Goroutines, res.TraceError, res.Generations =
			parsed.Events, parsed.Truncated, parsed.Goroutines, parsed.TraceError, parsed.Generations
	}
	allBlocked := parsed != nil && parsed.AllBlocked
	if timedOut && parsed != nil && parsed.Truncated {
		// The trace was not read to its end: judge from the goroutine dump.
		dump := stderr.All()
		if b, err := os.ReadFile(stacksFile); err == nil {
			dump = string(b)
		}
		allBlocked = dumpAllBlocked(dump)
	}
	leaked := parsed != nil && len(parsed.Leaked) > 0
	res.Status = classifyRun(res.ExitCode, timedOut, stderr.All(), allBlocked, leaked)
	if res.Status == "leak" {
		res.Leaked = parsed.Leaked
	}
	if !cfg.KeepTraces {
		os.Remove(traceFile)
		os.Remove(stacksFile)
		res.TraceFile = ""
	}
	return res
}

var runningGoroutineRe = regexp.MustCompile(`goroutine \d+ \[running`)

// classifyRun decides a run's status; the rules, in order:
//   - race: the race detector reported "WARNING: DATA RACE";
//   - timed out (harness kill, watchdog exit 124, or the test alarm's
//     "panic: test timed out"): deadlock when the trace shows every
//     remaining program goroutine blocked on a channel/select/sync
//     primitive (from the goroutine dump when the trace was truncated),
//     else timeout;
//   - exit code 0: leak when the trace, read whole and without error,
//     ends with a program goroutine blocked on such a primitive, else ok;
//   - deadlock: the runtime's own "all goroutines are asleep" fatal error;
//   - panic: exit code 2 with "panic: " and a "goroutine N [running" header;
//   - exit_error: anything else (incl. fatal runtime errors).
func classifyRun(exitCode int, timedOut bool, stderr string, allBlocked, leaked bool) string {
	switch {
	case strings.Contains(stderr, "WARNING: DATA RACE"):
		return "race"
	case timedOut:
		if allBlocked {
			return "deadlock"
		}
		return "timeout"
	case exitCode == 0:
		if leaked {
			return "leak"
		}
		return "ok"
	case strings.Contains(stderr, "all goroutines are asleep - deadlock!"):
		return "deadlock"
	case exitCode == 2 && strings.Contains(stderr, "panic: ") && runningGoroutineRe.MatchString(stderr):
		return "panic"
	}
	return "exit_error"
}

// parseFile parses a trace file; a file that cannot be read yields an empty
// result with the error recorded.
func parseFile(path string, opt ParseOptions) *ParseResult {
	f, err := os.Open(path)
	if err != nil {
		return &ParseResult{Mode: opt.Mode, TraceError: err.Error(), Events: []Event{}, Goroutines: []GoroutineSummary{},
			Leaked: []LeakedGoroutine{}}
	}
	defer f.Close()
	res, err := ParseTrace(f, opt)
	if err != nil {
		return &ParseResult{Mode: opt.Mode, TraceError: err.Error(), Events: []Event{}, Goroutines: []GoroutineSummary{},
			Leaked: []LeakedGoroutine{}}
	}
	return res
}

// capBuffer keeps the first and the last n bytes written to it.
type capBuffer struct {
	n          int
	head, tail bytes.Buffer
	dropped    bool
}

func newCapBuffer(n int) *capBuffer { return &capBuffer{n: n} }

func (c *capBuffer) Write(b []byte) (int, error) {
	total := len(b)
	if room := c.n - c.head.Len(); room > 0 {
		k := min(room, len(b))
		c.head.Write(b[:k])
		b = b[k:]
	}
	c.tail.Write(b)
	if c.tail.Len() > 2*c.n {
		keep := c.tail.Bytes()[c.tail.Len()-c.n:]
		c.tail = *bytes.NewBuffer(append([]byte{}, keep...))
		c.dropped = true
	}
	return total, nil
}

// All returns the head and the tail (with a marker where bytes were dropped).
func (c *capBuffer) All() string {
	if c.dropped {
		return c.head.String() + "\n...\n" + c.tail.String()
	}
	return c.head.String() + c.tail.String()
}

// Tail returns the output as written, minus dropped middle bytes.
func (c *capBuffer) Tail() string { return c.All() }
