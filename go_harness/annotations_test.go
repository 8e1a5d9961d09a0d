package main

// User annotations (trace.Log, regions) and the unfiltered transition stream
// of `go_harness transitions`.

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func TestUserAnnotationsAreProgramEvents(t *testing.T) {
	for _, r := range runExample(t, "user_annotations", 2, 5*time.Second) {
		if r.Status != "ok" {
			t.Fatalf("run %d: status %q, stderr %q", r.RunIndex, r.Status, r.StderrTail)
		}
		logs := map[string]int{}
		regions := map[string]int{}
		for _, e := range r.Events {
			switch e.Event {
			case "UserLog":
				logs[e.Category]++
				if e.Reason != "" || e.Peer != -1 || !strings.HasPrefix(e.Function, "main.") || e.File != "main.go" {
					t.Fatalf("log event %+v", e)
				}
				if e.Category == "main" && (e.Message != "waiting for 2 results" || e.GPath != "0" || e.Line != 31) {
					t.Fatalf("main's log %+v", e)
				}
			case "UserRegion":
				regions[e.Reason]++
				if e.Message != "square" || e.Category != "" || !strings.HasPrefix(e.GPath, "0.") {
					t.Fatalf("region event %+v", e)
				}
			default:
				if e.Category != "" || e.Message != "" {
					t.Fatalf("scheduler event with annotation fields %+v", e)
				}
			}
		}
		if logs["main"] != 1 || logs["worker"] != 2 || logs["result"] != 2 || regions["begin"] != 2 || regions["end"] != 2 {
			t.Fatalf("run %d: logs %v regions %v", r.RunIndex, logs, regions)
		}
	}
}

func TestTransitionsKeepRuntimeGoroutinesButNotTheWatchdog(t *testing.T) {
	r := runExample(t, "user_annotations", 1, 5*time.Second)[0]
	var out bytes.Buffer
	if err := cmdTransitions([]string{"-trace", r.TraceFile}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var trailer rawTrailer
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &trailer); err != nil || !trailer.End {
		t.Fatalf("trailer %q: %v", lines[len(lines)-1], err)
	}
	if trailer.NTransitions != len(lines)-1 || trailer.TraceError != "" || trailer.Generations < 1 {
		t.Fatalf("trailer %+v for %d lines", trailer, len(lines)-1)
	}
	starts := map[string]bool{}
	ids := map[int64]bool{}
	for _, line := range lines[:len(lines)-1] {
		var tr RawTransition
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatal(err)
		}
		ids[tr.Goroutine] = true
		if tr.From == "NotExist" {
			starts[tr.Function] = true
		}
		if tr.Function == "main._tracegenWatchdog" {
			t.Fatalf("the harness's watchdog is in the stream: %s", line)
		}
	}
	// The program's two workers are created by main, and the trace reader
	// by runtime/trace: the program view drops the latter.
	if !starts["main.main"] || !starts["runtime.traceStartReadCPU"] || !ids[1] {
		t.Fatalf("creations seen from %v, ids %v", starts, ids)
	}
	if len(ids) <= len(r.Goroutines) {
		t.Fatalf("%d raw goroutines, not more than the program's %d", len(ids), len(r.Goroutines))
	}
	if _, err := os.Stat(r.TraceFile); err != nil {
		t.Fatal(err)
	}
}
