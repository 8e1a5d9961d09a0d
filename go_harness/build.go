package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"time"
)

// Program is a program directory prepared and built in a scratch dir.
type Program struct {
	Mode       Mode     // ModeMain or ModeTest
	SrcDir     string   // the scratch copy; runs use it as working directory
	Binary     string   // the built executable
	ModulePath string   // from go.mod ("prog" when the harness wrote it)
	Tests      []string // test functions found by scanning (test mode)
	// Instrumentation is InstrRewritten, InstrDisabled or InstrFallback;
	// RewriteError says why a fallback happened ("" otherwise).
	Instrumentation string
	RewriteError    string
}

// BuildError is a failure to prepare or compile the program; it is data
// (status build_error), not a harness failure.
type BuildError struct {
	ExitCode int
	Output   string
}

func (e *BuildError) Error() string { return e.Output }

var (
	testFuncRe   = regexp.MustCompile(`(?m)^func\s+(Test[A-Za-z0-9_]*)\s*\(\s*\w+\s+\*testing\.T\s*\)`)
	modulePathRe = regexp.MustCompile(`(?m)^module\s+"?([^\s"]+)"?`)
)

// findTests scans the _test.go files of dir for func TestX(t *testing.T).
func findTests(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	var tests []string
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range testFuncRe.FindAllSubmatch(src, -1) {
			tests = append(tests, string(m[1]))
		}
	}
	return tests, nil
}

// copyTree copies the regular files and directories of src into dst
// (symlinks and other special files are skipped, and so is the directory
// skip, so a scratch dir inside the program dir is not copied into itself).
func copyTree(src, dst, skip string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == skip {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, data, 0o644)
		}
		return nil
	})
}

// goTool is the go command: "go" from PATH, else $GOROOT/bin/go, else the
// GOROOT this harness was built with.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	for _, root := range []string{os.Getenv("GOROOT"), runtime.GOROOT()} {
		if p := filepath.Join(root, "bin", "go"); root != "" && fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// goEnv is the environment of every go command: offline, local toolchain,
// caches (GOCACHE, GOMODCACHE) inherited from the caller.
func goEnv() []string {
	return append(os.Environ(),
		"GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOWORK=off", "GOSUMDB=off")
}

// Prepare copies dir into work/src, decides the mode, writes go.mod when
// missing, rewrites the object operations when rewrite is set (rewrite.go),
// injects the watchdog into a main package and builds once. When rewriting
// or the rewritten build fails, the original source is copied and built
// again: Instrumentation is then InstrFallback, with the reason in
// RewriteError. On a *BuildError the returned Program is non-nil and its Mode
// is decided.
func Prepare(ctx context.Context, dir, work string, mode Mode, race, rewrite bool) (*Program, error) {
	p := &Program{SrcDir: filepath.Join(work, "src"), Instrumentation: InstrDisabled}
	if err := p.stage(dir, work, mode); err != nil {
		return p, err
	}
	if !rewrite {
		return p, p.compile(ctx, work, race)
	}
	p.Instrumentation = InstrRewritten
	err := rewriteObjects(p.SrcDir, p.Mode == ModeTest, race)
	if err == nil {
		err = p.compile(ctx, work, race)
		var be *BuildError
		if !errors.As(err, &be) || ctx.Err() != nil {
			return p, err
		}
		err = fmt.Errorf("rewritten program failed to build: %s", tailString(be.Output, 1000))
	} else {
		err = fmt.Errorf("rewrite: %w", err)
	}
	p.Instrumentation, p.RewriteError = InstrFallback, err.Error()
	if err := p.stage(dir, work, mode); err != nil {
		return p, err
	}
	return p, p.compile(ctx, work, race)
}

// stage copies dir into the scratch source dir (replacing what was there),
// decides the mode and writes go.mod when missing.
func (p *Program) stage(dir, work string, mode Mode) error {
	if err := os.RemoveAll(p.SrcDir); err != nil {
		return err
	}
	if err := copyTree(dir, p.SrcDir, work); err != nil {
		return err
	}
	tests, err := findTests(p.SrcDir)
	if err != nil {
		return err
	}
	p.Tests, p.Mode = tests, mode
	if p.Mode == ModeAuto {
		p.Mode = ModeMain
		if len(tests) > 0 {
			p.Mode = ModeTest
		}
	}
	p.ModulePath, err = ensureGoMod(p.SrcDir)
	return err
}

// compile injects the watchdog (main packages) and builds the staged source.
func (p *Program) compile(ctx context.Context, work string, race bool) error {
	args := []string{"build"}
	p.Binary = filepath.Join(work, "prog.bin")
	var injectErr error
	if p.Mode == ModeTest {
		args, p.Binary = []string{"test", "-c"}, filepath.Join(work, "prog.test")
	} else {
		// When injection fails (syntax error, no main package, no Go files)
		// the build below still runs so the compiler's own message is reported.
		injectErr = injectWatchdog(p.SrcDir)
	}
	args = append(args, "-trimpath", "-o", p.Binary)
	if race {
		args = append(args, "-race")
	}
	args = append(args, ".")
	cmd := exec.CommandContext(ctx, goTool(), args...)
	cmd.Dir, cmd.Env = p.SrcDir, goEnv()
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return buildTimeoutError(buildTimeout)
	}
	if err != nil {
		code := 1
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
		return &BuildError{ExitCode: code, Output: tailString(string(out), 4000)}
	}
	if injectErr != nil {
		return &BuildError{ExitCode: 1, Output: "tracegen: " + injectErr.Error()}
	}
	return nil
}

// ensureGoMod returns the module path of dir's go.mod, writing
// "module prog / go 1.26" when there is none.
func ensureGoMod(dir string) (string, error) {
	path := filepath.Join(dir, "go.mod")
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return "prog", os.WriteFile(path, []byte("module prog\n\ngo 1.26\n"), 0o644)
	}
	if err != nil {
		return "", err
	}
	m := modulePathRe.FindSubmatch(data)
	if m == nil {
		return "", &BuildError{ExitCode: 1, Output: "go.mod has no module line"}
	}
	return string(m[1]), nil
}

// tailString returns at most the last n bytes of s.
func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// buildTimeout bounds one build (compiling a test binary with -race from a
// cold cache takes a while on small machines).
const buildTimeout = 5 * time.Minute

// buildTimeoutError wraps a context expiry during the build.
func buildTimeoutError(d time.Duration) error {
	return &BuildError{ExitCode: -1, Output: fmt.Sprintf("build timed out after %v", d)}
}
