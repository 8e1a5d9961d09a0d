// Command go_harness runs a Go program N times under runtime/trace and
// prints the program's goroutine events as JSON lines. See README.md.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = cmdRun(os.Args[2:], os.Stdout)
	case "parse":
		err = cmdParse(os.Args[2:], os.Stdout)
	case "transitions":
		err = cmdTransitions(os.Args[2:], os.Stdout)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_harness:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: go_harness run -dir DIR -work DIR [flags] | go_harness parse -trace FILE [flags] | go_harness transitions -trace FILE")
	os.Exit(2)
}

func parseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeMain, ModeTest:
		return m, nil
	}
	return "", fmt.Errorf("-mode must be auto, main or test, got %q", s)
}

func parseProcs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-gomaxprocs: %q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func cmdRun(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	dir := fs.String("dir", "", "program directory (main package or package with TestX functions)")
	work := fs.String("work", "", "writable scratch directory (binary, traces)")
	runs := fs.Int("runs", 5, "number of runs, each its own process")
	timeout := fs.Duration("timeout", 5*time.Second, "per-run timeout")
	procs := fs.String("gomaxprocs", "", "comma list of GOMAXPROCS values, cycled through by run index")
	race := fs.Bool("race", false, "build with the race detector")
	test := fs.String("test", "^Test", "regexp of the tests to run (test packages)")
	maxEvents := fs.Int("max-events", 20000, "cap on events per run")
	modeFlag := fs.String("mode", "auto", "auto|main|test (auto: test when a _test.go file has func TestX(t *testing.T))")
	keep := fs.Bool("keep-traces", true, "keep run-<i>.trace files in -work (false: delete each after parsing)")
	rewrite := fs.Bool("rewrite", true, "rewrite channel and sync operations to log their objects (falls back to the original source on failure)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mode, err := parseMode(*modeFlag)
	if err != nil {
		return err
	}
	cfg := RunConfig{Runs: *runs, Timeout: *timeout, TestRegex: *test, MaxEvents: *maxEvents, KeepTraces: *keep}
	if cfg.GOMAXPROCS, err = parseProcs(*procs); err != nil {
		return err
	}
	switch {
	case *dir == "" || *work == "":
		return errors.New("-dir and -work are required")
	case cfg.Runs < 1 || cfg.MaxEvents < 1 || cfg.Timeout <= 0:
		return errors.New("-runs, -max-events and -timeout must be positive")
	}
	// Absolute paths: runs execute inside work/src, and trace_file is reported.
	if *dir, err = filepath.Abs(*dir); err != nil {
		return err
	}
	if *work, err = filepath.Abs(*work); err != nil {
		return err
	}
	if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("-dir %q is not a directory", *dir)
	}
	if err := os.MkdirAll(*work, 0o755); err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)

	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	start := time.Now()
	prog, err := Prepare(ctx, *dir, *work, mode, *race, *rewrite)
	var be *BuildError
	if errors.As(err, &be) {
		res := RunResult{
			RunIndex: -1, Mode: mode, Status: "build_error", ExitCode: be.ExitCode,
			DurationMs: time.Since(start).Milliseconds(), StderrTail: be.Output,
			Events: []Event{}, Goroutines: []GoroutineSummary{}, Leaked: []LeakedGoroutine{},
		}
		if prog != nil { // the mode was decided before the build failed
			res.Mode, res.Instrumentation, res.RewriteError = prog.Mode, prog.Instrumentation, prog.RewriteError
		}
		return enc.Encode(res)
	}
	if err != nil {
		return err
	}
	for i := range cfg.Runs {
		if err := enc.Encode(RunOnce(prog, cfg, i, *work)); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// parseTrailer is the last line of `go_harness parse`.
type parseTrailer struct {
	End         bool               `json:"end"`
	Mode        Mode               `json:"mode"`
	NEvents     int                `json:"n_events"`
	Truncated   bool               `json:"truncated"`
	TraceError  string             `json:"trace_error"`
	Goroutines  []GoroutineSummary `json:"goroutines"`
	Generations int                `json:"generations"`
}

func cmdParse(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("parse", flag.ContinueOnError)
	file := fs.String("trace", "", "runtime/trace file")
	maxEvents := fs.Int("max-events", 20000, "cap on emitted events")
	modeFlag := fs.String("mode", "auto", "auto|main|test: which goroutines are roots")
	prefix := fs.String("file-prefix", "", "prefix stripped from file names (e.g. \"prog/\")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mode, err := parseMode(*modeFlag)
	if err != nil {
		return err
	}
	if *file == "" || *maxEvents < 1 {
		return errors.New("-trace is required and -max-events must be positive")
	}
	f, err := os.Open(*file)
	if err != nil {
		return err
	}
	defer f.Close()
	opt := DefaultParseOptions()
	opt.Mode, opt.MaxEvents, opt.FilePrefix = mode, *maxEvents, *prefix
	res, err := ParseTrace(f, opt)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for _, ev := range res.Events {
		if err := enc.Encode(ev); err != nil {
			return err
		}
	}
	return enc.Encode(parseTrailer{End: true, Mode: res.Mode, NEvents: len(res.Events),
		Truncated: res.Truncated, TraceError: res.TraceError, Goroutines: res.Goroutines,
		Generations: res.Generations})
}
