package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/exp/trace"
)

// RawTransition is one line of `go_harness transitions`: a goroutine state
// transition of any goroutine (the program's, the runtime's, the testing
// framework's), unfiltered and with the runtime's own goroutine ids, for
// consumers that want the trace as a plain reader sees it (the weave export's
// --runtime-goroutines). Status records (from Undetermined, X->X) are
// included; nothing is folded.
type RawTransition struct {
	TimeNs    int64  `json:"time_ns"`   // the trace's own timestamp (not rebased)
	Goroutine int64  `json:"goroutine"` // the runtime's goroutine id
	From      string `json:"from"`      // Undetermined | NotExist | Runnable | Running | Waiting | Syscall
	To        string `json:"to"`
	Reason    string `json:"reason"`   // the runtime's reason (block reasons, "preempted", ...)
	Function  string `json:"function"` // innermost frame of the event's stack, any package (the main rename undone); "" without a stack
}

// rawTrailer is the last line of `go_harness transitions`.
type rawTrailer struct {
	End          bool   `json:"end"`
	NTransitions int    `json:"n_transitions"`
	TraceError   string `json:"trace_error"`
	Generations  int    `json:"generations"`
}

// harnessGoroutine reports whether a transition belongs to one of the
// harness's own goroutines (inject.go: the watchdog, the leak grace's
// waiter), which no traced program has: its own stack (a new goroutine's
// start stack) starts in a main._tracegen* function. Main, which runs the
// harness's code only after the user's main returned, stays in.
func harnessGoroutine(rt *rawTransition) bool {
	outermost := ""
	for f := range rt.stack.Frames() {
		if f.Func != "runtime.goexit" {
			outermost = f.Func
		}
	}
	return strings.HasPrefix(outermost, "main._tracegen")
}

// writeRawTransitions streams every goroutine transition of the trace r to w
// as JSON lines, then the trailer. The watchdog's goroutine, once seen by a
// stack, is left out from then on and before (its id is learnt on the fly,
// so its transitions are buffered per id until it is known; see harnessGoroutine).
func writeRawTransitions(r io.Reader, w io.Writer) error {
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	rename := (&traceParser{opt: DefaultParseOptions()}).rename
	var lines []RawTransition
	harness := map[trace.GoID]bool{}
	errText, gens := readTransitions(r, func(rt *rawTransition) bool {
		if rt.annotation != "" {
			return true
		}
		if harnessGoroutine(rt) {
			harness[rt.id] = true
		}
		lines = append(lines, RawTransition{
			TimeNs: int64(rt.t), Goroutine: int64(rt.id), From: rt.from.String(), To: rt.to.String(),
			Reason: rt.reason, Function: rename(firstFunc(rt.evStack)),
		})
		return len(lines) < maxBufferedTransitions
	})
	if len(lines) >= maxBufferedTransitions {
		errText = "too many goroutine transitions to buffer; stopped reading"
	}
	if debugRaw {
		for id := range harness {
			fmt.Fprintf(os.Stderr, "harness goroutine g%d left out\n", id)
		}
	}
	n := 0
	for _, l := range lines {
		if harness[trace.GoID(l.Goroutine)] {
			continue
		}
		if err := enc.Encode(l); err != nil {
			return err
		}
		n++
	}
	if err := enc.Encode(rawTrailer{End: true, NTransitions: n, TraceError: errText, Generations: gens}); err != nil {
		return err
	}
	return out.Flush()
}

func cmdTransitions(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("transitions", flag.ContinueOnError)
	file := fs.String("trace", "", "runtime/trace file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("-trace is required")
	}
	f, err := os.Open(*file)
	if err != nil {
		return err
	}
	defer f.Close()
	return writeRawTransitions(f, stdout)
}
