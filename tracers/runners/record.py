"""One function record in the forked child of the function runner (tracers/runners/functions.py).

The child reads its own record from the runner's stdin (`run_child`), cuts itself off (`_isolate`: not
dumpable, killed with the runner, its own process group, no descriptor but its output and trace files),
writes the trace header, compiles the record, evaluates its input and traces the entry call
(`trace_record`), writing event arrays and the end object to the trace file. For the parity check a second
child runs the same call untraced (`run_parity_child`) and writes `{"type": "parity", "exit", "result"}`.
Standard library only.
"""

import builtins
import json
import os
import signal
import sys
import threading

from tracers.guard import isolation
from tracers.json_writers import encode_object
from tracers.reprs import objstate
from tracers.reprs.saferepr import SafeRepr
from tracers.runners import protocol
from tracers.trace import backends
from tracers.trace.backends import call_arguments, source_lines
from tracers.trace.tamper import arm_guard, disarm_guard

RECORD_FILENAME = "<tracegen>"
RECORD_FRAMES = 991  # recursion limit above the record's caller: 1,000 less the chunked runner's frames below it
_PLAIN_ARGS = frozenset(map(id, (str, int, float, bool, type(None), bytes)))


def _line_writer(handle):
    def write(line):
        handle.write(line)
        handle.write("\n")

    return write


def _load_record(record, write):
    """Compile the record and evaluate its input: (entry, args, kwargs, source lines), or None after writing
    a failure object."""
    stage = "setup"
    token = arm_guard(_no_trace, threading.get_ident())  # no gc walk to the tracer's state before it runs
    try:
        code = record["code"]
        namespace = {"__name__": "__tracegen__", "__builtins__": builtins.__dict__}  # never the sealed copy
        exec(compile(code, RECORD_FILENAME, "exec"), namespace)
        entry = _entry(namespace, record.get("entry") or "f")
        stage = "input"
        args, kwargs = call_arguments(record["input"], namespace)
    except BaseException as error:
        disarm_guard(token)
        write(
            json.dumps(
                {"type": "failure", "stage": stage, "error_type": type(error).__name__, "message": _message(error)}
            )
        )
        return None
    disarm_guard(token)
    return entry, args, kwargs, source_lines(code)


def _no_trace(reason):
    """A refused call before the trace starts: the refusal itself (TracerTampered) fails the record's setup."""


def _entry(namespace, name):
    """The function the record calls: defined by its code, and callable (else the record fails at setup)."""
    if name not in namespace:
        raise NameError("entry %r is not defined by the code" % name)
    entry = namespace[name]
    if not callable(entry):
        raise TypeError("entry %r is a %s, not a function" % (name, objstate.qualname(type(entry))))
    return entry


def _give_the_record_its_stack():
    """Set the recursion limit to RECORD_FRAMES above this frame: a record gets the same stack wherever the
    runner calls it from, so a refactor of the runner moves no trace's recursion_limit cut."""
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    sys.setrecursionlimit(depth + RECORD_FRAMES)


def trace_record(record, budgets, limits, out, check_parity, backend):
    """Child side: compile, evaluate the input, trace the entry call. Writes the end object."""
    write = _line_writer(out)
    loaded = _load_record(record, write)
    if loaded is None:
        return
    entry, args, kwargs, lines = loaded
    tracer = backends.tracer_class(backend)(
        is_traced=lambda c: c.co_filename == RECORD_FILENAME,
        source_line=lambda c, n: lines[n - 1] if 0 < n <= len(lines) else "",
        write=write,
        flush=out.flush,
        budgets=budgets,
        limits=limits,
    )
    write(encode_object({"type": "start"}))
    out.flush()
    _give_the_record_its_stack()
    outcome = tracer.run(entry, args, kwargs)
    end = dict(outcome.as_dict(), type="end")
    if check_parity and outcome.exit != "never":
        end["result"] = SafeRepr(limits)(tracer.result)
    write(encode_object(end))  # bound before the record ran: a patched json.dumps cannot forge it


def _run_untraced(record, limits, out):
    """Child side of the parity check: the same call without the tracer; writes how it ended."""
    loaded = _load_record(record, lambda line: None)
    if loaded is None:
        return
    entry, args, kwargs, _ = loaded
    _give_the_record_its_stack()
    try:
        result, exit_ = entry(*args, **kwargs), "normal"
    except BaseException as error:
        result, exit_ = error, "error"
    out.write(json.dumps({"type": "parity", "exit": exit_, "result": SafeRepr(limits)(result)}) + "\n")


def _message(error):
    """A builtin exception's message; a user exception class's type and args (its `__str__` is not run)."""
    try:
        args = BaseException.__dict__["args"].__get__(error)
        if objstate.is_heap(type(error)) or not all(id(type(arg)) in _PLAIN_ARGS for arg in args):
            return SafeRepr()(error)[:2000]
        return ("%s" % (error,))[:2000]
    except BaseException:
        return "<unprintable %s>" % objstate.qualname(type(error))


def _read_record(length):
    """Child side: the record's own payload, read from the runner's stdin before anything else."""
    payload = protocol.read_exact(0, length)
    if len(payload) != length:
        raise SystemExit("runner: the record's payload ended early")
    return json.loads(payload)


def run_child(length, budgets, limits, trace_fd, output_fd, check_parity, backend):
    record = _read_record(length)
    null = _isolate(output_fd, trace_fd)
    with open(trace_fd, "w", encoding="ascii", buffering=1 << 16) as out:
        _guard_trace_file(out, null)
        out.write(
            json.dumps(
                {
                    "type": "header",
                    "id": record.get("id"),
                    "tracer_version": backends.tracer_version(backend),
                    "tracer_backend": backend,
                    "python": "%d.%d.%d" % sys.version_info[:3],
                    "repr_mode": limits.mode,
                }
            )
            + "\n"
        )
        trace_record(record, budgets, limits, out, check_parity, backend)
        out.flush()


def run_parity_child(length, limits, parity_fd, output_fd):
    record = _read_record(length)
    null = _isolate(output_fd, parity_fd)
    with open(parity_fd, "w", encoding="ascii") as out:
        _guard_trace_file(out, null)
        _run_untraced(record, limits, out)
        out.flush()


def _isolate(output_fd, own_fd):
    """Before the record's code runs: not dumpable, killed with the runner, its own process group, stdin
    from /dev/null, stdout and stderr to its output file, and no descriptor but these and `own_fd` (the
    runner's result stream and directories are closed)."""
    isolation.untraceable()
    isolation.die_with_parent()
    os.setpgid(0, 0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    low = 3
    for fd in sorted({null, own_fd}):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a full disk quota is an OSError, not a kill
    return null


def _guard_trace_file(out, null):
    """Keep the trace file whole when the traced code forks or is asked to stop.

    A process forked by the traced code stops tracing and writes its copy of the buffer to /dev/null;
    SIGTERM (sent by the runner before SIGKILL) flushes what was recorded before a C-level hang.
    """

    def after_fork():
        sys.settrace(None)
        threading.settrace(None)
        os.dup2(null, out.fileno())

    def on_term(signum, frame):
        try:
            out.flush()
        finally:
            os._exit(0)

    os.register_at_fork(after_in_child=after_fork)
    signal.signal(signal.SIGTERM, on_term)
