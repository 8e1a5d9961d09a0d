package main

import (
	"strings"

	"golang.org/x/exp/trace"
)

// stdRoots are the first path elements of the Go standard library (GOROOT/src
// of Go 1.26; "vendor" covers its vendored golang.org/x packages, whose
// functions are named vendor/golang.org/x/...). A frame whose function lives
// in one of these packages is never a "user" frame; third-party modules
// (including golang.org/x/... required by the program) are user code.
var stdRoots = map[string]bool{
	"archive": true, "arena": true, "bufio": true, "builtin": true, "bytes": true, "cmp": true,
	"compress": true, "container": true, "context": true, "crypto": true, "database": true,
	"debug": true, "embed": true, "encoding": true, "errors": true, "expvar": true, "flag": true,
	"fmt": true, "go": true, "hash": true, "html": true, "image": true, "index": true,
	"internal": true, "io": true, "iter": true, "log": true, "maps": true, "math": true,
	"mime": true, "net": true, "os": true, "path": true, "plugin": true, "reflect": true,
	"regexp": true, "runtime": true, "simd": true, "slices": true, "sort": true, "strconv": true,
	"strings": true, "structs": true, "sync": true, "syscall": true, "testing": true, "text": true,
	"time": true, "unicode": true, "unique": true, "unsafe": true, "vendor": true, "weak": true,
}

// funcPackage returns the import path of the package a fully qualified
// function name belongs to: "sync.(*Mutex).Lock" -> "sync",
// "example.com/a/b.F.func1" -> "example.com/a/b".
func funcPackage(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	dot := strings.IndexByte(fn[slash+1:], '.')
	if dot < 0 {
		return fn
	}
	return fn[:slash+1+dot]
}

// isUserFunc reports whether fn belongs to the program rather than to the
// standard library or the runtime.
func isUserFunc(fn string) bool {
	if fn == "" {
		return false
	}
	pkg := funcPackage(fn)
	root, _, _ := strings.Cut(pkg, "/")
	return !stdRoots[root]
}

// frame is one resolved source position.
type frame struct {
	Func string
	File string
	Line int
}

// topUserFrame returns the innermost frame of st that is user code; ok is
// false when the stack has none (or is empty).
func topUserFrame(st trace.Stack) (frame, bool) {
	for f := range st.Frames() {
		if isUserFunc(f.Func) {
			return frame{Func: f.Func, File: f.File, Line: int(f.Line)}, true
		}
	}
	return frame{}, false
}

// firstFunc returns the innermost function name of st ("" for no stack). For
// the stack carried by a GoCreate transition this is the new goroutine's
// start function.
func firstFunc(st trace.Stack) string {
	for f := range st.Frames() {
		return f.Func
	}
	return ""
}

// stackHas reports whether any frame of st is the function fn.
func stackHas(st trace.Stack, fn string) bool {
	for f := range st.Frames() {
		if f.Func == fn {
			return true
		}
	}
	return false
}
