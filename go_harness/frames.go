package main

import (
	"path"
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

// generatedFiles are the files of a binary that are Go code but not the
// program's: the test binary's generated main (`main.main` in _testmain.go),
// the harness's watchdog (its `main.main` calls the user's main) and the
// object-operation helpers the rewritten code calls (rewrite.go), in any
// package.
var generatedFiles = map[string]bool{"_testmain.go": true, watchdogFile: true, objectsFile: true}

// isProgramFrame reports whether a frame is the program's own code: user
// code (isUserFunc) that is neither generated (_testmain.go, the watchdog
// file, the object helpers) nor one of the harness's main._tracegen* functions. fn is the raw
// function name as in the trace (before the main rename).
func isProgramFrame(fn, file string) bool {
	return isUserFunc(fn) && !strings.HasPrefix(fn, "main._tracegen") && !generatedFiles[path.Base(file)]
}

// frame is one resolved source position.
type frame struct {
	Func string
	File string
	Line int
}

// topProgramFrame returns the innermost frame of st that is program code
// (isProgramFrame); ok is false when the stack has none (or is empty).
func topProgramFrame(st trace.Stack) (frame, bool) {
	for f := range st.Frames() {
		if isProgramFrame(f.Func, f.File) {
			return frame{Func: f.Func, File: f.File, Line: int(f.Line)}, true
		}
	}
	return frame{}, false
}

// firstFrame returns the innermost frame of st (the zero frame for no
// stack). For the stack carried by a GoCreate transition this is the new
// goroutine's start function; for the creation event's own stack it is the
// function that executed the go statement.
func firstFrame(st trace.Stack) frame {
	for f := range st.Frames() {
		return frame{Func: f.Func, File: f.File, Line: int(f.Line)}
	}
	return frame{}
}

// firstFunc returns the innermost function name of st ("" for no stack).
func firstFunc(st trace.Stack) string { return firstFrame(st).Func }

// hasFrames reports whether st has at least one frame.
func hasFrames(st trace.Stack) bool {
	for range st.Frames() {
		return true
	}
	return false
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
