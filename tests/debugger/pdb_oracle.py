"""Drive CPython's own debugger engine (`bdb.Bdb`, which `pdb.Pdb` extends) over a program.

`run_oracle` executes `entry(input)` under a `bdb.Bdb` subclass and, at every stop, issues a seeded
random command the way pdb's commands do: `step` -> `set_step()`, `next` -> `set_next(frame)`, `return`
-> `set_return(frame)`, `break L` + `continue` -> `set_break(file, L)` + `set_continue()`, and a bare
`continue`. Breakpoints are cleared at every stop (each acts like pdb's `tbreak`). The subclass
stops exactly where `Pdb` stops (`user_call` only when `stop_here`, like `Pdb.user_call`; every
`user_line`/`user_return`/`user_exception`), but does not write `__return__`/`__exception__` into the
frame's locals the way Pdb's display code does.

To know which trace event each stop is, the settrace hook is a thin counting wrapper around bdb's own
dispatch: it counts events of the program's frames exactly as `tracers.trace.tracer` records them (dropping
the return-with-None that follows a frame's final exception) and forwards each event to bdb with
settrace's own rules (the global function at every `call`, the frame's local function afterwards,
replaced by its non-None return value). Frames outside the program are not forwarded — as if pdb had
been told to skip every other module; the programs call only builtins implemented in C.

An error inside the oracle's hooks (a bug in it, a command bdb refuses) is an `OracleError` out of
`run_oracle`, never taken for the program's own exception: raised in a trace function, it would surface in
the program, turn tracing off and end the session early, and a comparison of no steps agrees with anything.
"""

import bdb
import linecache
import random
import sys
from dataclasses import dataclass

from tracers.reprs.saferepr import Limits, SafeRepr

_GEN_FLAGS = 0x20 | 0x80 | 0x200  # generator, coroutine, async generator


class OracleError(Exception):
    """The oracle itself went wrong (a bug in it, or bdb refusing a command): its steps are not to be trusted."""


@dataclass(frozen=True)
class Stop:
    """Where bdb stopped: a trace event index, or the unwinding return of a frame (not in the trace)."""

    kind: str  # "event" | "unwind" (the return settrace emits after the frame's final exception)
    index: int  # event index; for "unwind", the index of that frame's final exception event
    event: str
    function: str
    lineno: int
    locals: dict
    in_generator: bool


@dataclass(frozen=True)
class Step:
    start: Stop
    command: str  # step | next | return | break | continue
    lineno: int | None  # the breakpoint's line number (break only)


class OracleBdb(bdb.Bdb):
    def __init__(self, filename: str, code_lines: list[str], rng: random.Random, weights: dict, max_stops: int):
        super().__init__()
        self.filename = filename
        self.code_lines = code_lines
        self.rng = rng
        self.weights = weights
        self.max_stops = max_stops
        self.repr = SafeRepr(Limits())
        self.count = 0
        self.last_kind: dict = {}
        self.last_index: dict = {}
        self.bdb_local: dict = {}
        self.current: tuple | None = None
        self.steps: list[Step] = []
        self.failure: BaseException | None = None
        self.break_lines = [
            n
            for n, text in enumerate(code_lines, 1)
            if text.strip() and not text.lstrip().startswith(("def ", "class ", "#", "@"))
        ]

    # -- settrace emulation with event counting ----------------------------------------------------
    def _global(self, frame, event, arg):
        try:
            return self._global_hook(frame, event, arg)
        except BaseException as error:
            self._failed(error)
            raise

    def _local(self, frame, event, arg):
        try:
            return self._local_hook(frame, event, arg)
        except BaseException as error:
            self._failed(error)
            raise

    def _failed(self, error: BaseException) -> None:
        """Record an error raised inside the hooks (the oracle's own, or bdb's). Raised from a trace
        function it reaches the program as if the program had raised it, and the program may catch it:
        `run_entry` raises it afterwards whatever the program did with it."""
        if self.failure is None and not isinstance(error, bdb.BdbQuit):
            self.failure = error

    def _global_hook(self, frame, event, arg):
        if frame.f_code.co_filename != self.filename:
            return None
        self._count(frame, event)
        local = self.trace_dispatch(frame, event, arg)
        if local is not None:  # settrace keeps a frame's previous local function when the global says None
            self.bdb_local[frame] = local
        return self._local

    def _local_hook(self, frame, event, arg):
        if event == "return" and self.last_kind.get(frame) == "exception":
            self.current = ("unwind", self.last_index[frame])
            self.last_kind[frame] = "unwound"
        elif event in ("line", "return", "exception"):
            self._count(frame, event)
        else:
            return self._local
        local = self.bdb_local.get(frame)
        if local is not None:
            result = local(frame, event, arg)
            if result is not None:
                self.bdb_local[frame] = result
        return self._local

    def _count(self, frame, event):
        self.current = ("event", self.count)
        self.last_kind[frame] = event
        self.last_index[frame] = self.count
        self.count += 1

    # -- stops (what Pdb does) ---------------------------------------------------------------------
    def user_call(self, frame, argument_list):
        if self.stop_here(frame):
            self._stop(frame, "call")

    def user_line(self, frame):
        self._stop(frame, "line")

    def user_return(self, frame, return_value):
        self._stop(frame, "return")

    def user_exception(self, frame, exc_info):
        self._stop(frame, "exception")

    def _stop(self, frame, event):
        self.clear_all_breaks()
        if frame.f_code.co_filename != self.filename:
            # Stepping past the entry's return, bdb (like pdb) stops in the frame that called the entry
            # (it sets that frame's f_trace itself): for us the program has ended.
            frame.f_trace = None
            self.set_continue()
            return
        kind, index = self.current
        stop = Stop(
            kind,
            index,
            "return" if kind == "unwind" else event,
            frame.f_code.co_qualname,
            frame.f_lineno,
            {name: self.repr(value) for name, value in frame.f_locals.items()},
            bool(frame.f_code.co_flags & _GEN_FLAGS),
        )
        if kind == "unwind":
            command = "step"  # pdb's extra stop at the unwinding return: step on (tests compare around it)
        elif len(self.steps) >= self.max_stops:
            command = "continue"
        else:
            command = _draw(self.rng, self.weights)
        lineno = None
        if command == "continue":
            self.set_continue()
        elif command == "step":
            self.set_step()
        elif command == "next":
            self.set_next(frame)
        elif command == "return":
            self.set_return(frame)
        else:
            lineno = self.break_lines[int(self.rng.random() * len(self.break_lines))]
            error = self.set_break(self.filename, lineno)
            if error:
                raise OracleError(f"bdb refused a breakpoint at line {lineno}: {error}")
            self.set_continue()
        self.steps.append(Step(stop, command, lineno))

    def set_continue(self):
        # bdb's version turns tracing off when no breakpoint is set; keep the counting hook alive.
        self._set_stopinfo(self.botframe, None, -1)

    def run_entry(self, function, args, kwargs):
        """Run the program under the oracle. The program's own uncaught exception ends the run (exit
        "error", as in its trace); an error of the oracle itself raises `OracleError`, even when the
        program caught it (an exception raised in a trace function surfaces inside the traced code)."""
        self.reset()
        sys.settrace(self._global)
        try:
            function(*args, **kwargs)
        except bdb.BdbQuit:
            pass
        except Exception:
            pass  # the program's own uncaught exception ends the run (exit "error"); the hooks' own errors
            # reach here too, or were caught by the program: they were recorded, and are raised below
        finally:
            sys.settrace(None)
        if self.failure is not None:
            raise OracleError(f"the oracle failed: {self.failure!r}") from self.failure


def _draw(rng: random.Random, weights: dict) -> str:
    point = rng.random() * sum(weights.values())
    for name, weight in weights.items():
        point -= weight
        if point < 0:
            return name
    return name


DEFAULT_WEIGHTS = {"step": 0.4, "next": 0.3, "return": 0.15, "break": 0.13, "continue": 0.02}


def run_oracle(
    code: str,
    entry: str,
    input: str,
    seed: int,
    *,
    weights: dict | None = None,
    max_stops: int = 300,
    name: str = "prog",
) -> list[Step]:
    """The stops of one pdb session with random commands; the last step's landing is the program's end."""
    filename = f"<oracle-{name}>"
    lines = code.splitlines(keepends=True)
    linecache.cache[filename] = (len(code), None, lines, filename)
    namespace = {"__name__": "__tracegen__"}
    exec(compile(code, filename, "exec"), namespace)
    args, kwargs = eval(compile("(lambda *a, **k: (a, k))(%s)" % input, "<input>", "eval"), namespace)
    debugger = OracleBdb(filename, code.splitlines(), random.Random(seed), weights or DEFAULT_WEIGHTS, max_stops)
    try:
        debugger.run_entry(namespace[entry], args, kwargs)
    finally:
        debugger.clear_all_breaks()
        linecache.cache.pop(filename, None)
    return debugger.steps
