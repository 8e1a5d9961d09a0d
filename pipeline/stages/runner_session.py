"""A warm function runner: one sandboxed `tracers.runners.functions` kept per worker process and fed records
one at a time, so a record costs a fork in a warm interpreter, not a sandbox and an interpreter start.

The runner lives across chunks (units) with the same sandbox and settings, and is replaced when they
change, after `MAX_RECORDS` records, and whenever it dies, stalls or breaks the protocol. Each record has
its own wall clock, enforced here whatever the record does to the sandbox's processes: past it the whole
sandbox is killed and the record is blamed. A record the runner never started, or one it asked to run
elsewhere (`restart`), runs once more in a fresh sandbox; a second time, it is blamed, so every record
costs at most two sandboxes.
"""

import atexit
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, replace

from pipeline.sandbox import Bind, Sandbox, SandboxResult
from pipeline.sandbox.base import SandboxProcess
from pipeline.sandbox.tracers_mount import TRACERS_PARENT, tracers_bind
from pipeline.stages.runnerstream import FrameReader, RecordOutput, StreamBroken, ended_by_itself, write_all
from tracers.guard.isolation import SEAL_STREAMS_ENV
from tracers.runners.protocol import command

MAX_RECORDS = 10_000  # a runner's lifetime in records: its own CPU time stays far below the sandbox's cpu limit
START_MARGIN_S = 30.0  # the sandbox's start (a container on a loaded machine), on top of the first record
RECORD_MARGIN_S = 5.0  # fork, kill, cleanup and transfer, on top of a record's own timeouts
FRAME_SLACK = 2 << 20  # a trace frame may pass max_bytes by the end objects and a torn line


@dataclass(frozen=True)
class Blamed:
    """The runner ended while this record was in it (or twice before it started): the sandbox's result."""

    result: SandboxResult
    started: bool


class RunnerSession:
    """One sandboxed runner for `settings` (a TraceSettings), started on first use."""

    def __init__(self, sandbox: Sandbox, settings):
        self.sandbox = sandbox
        self.settings = settings
        self.process: SandboxProcess | None = None
        self.work: str | None = None
        self.reader: FrameReader | None = None
        self.sent = 0  # records sent to the current runner
        self.start_margin_s = 0.0  # added to the next record's deadline: the runner is just starting

    def trace(self, record) -> RecordOutput | Blamed:
        """Run one record (a FunctionRecord) and return what the runner sent for it."""
        payload = json.dumps(record.request()).encode()
        for attempt in (1, 2):
            if self.process is None or self.sent >= MAX_RECORDS:
                self.close()
                self._start()
            outcome = self._run(payload)
            if isinstance(outcome, RecordOutput):
                return outcome
            if outcome.started or attempt == 2:
                return outcome
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Stop the runner (it ends when its stdin closes) and remove its host scratch."""
        if self.process is not None:
            self.process.stop()
            self.process = None
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
            self.work = None

    def _start(self) -> None:
        sandbox, settings = self.sandbox, self.settings
        binds = [tracers_bind()]
        work = sandbox.scratch
        if work is None:  # the `process` backend: a host directory, isolating nothing
            self.work = tempfile.mkdtemp(prefix="tracegen-work-")
            work = self.work
            binds.append(Bind(work, writable=True))
        self.process = sandbox.start(
            [sandbox.python, "-s", "-B", "-m", "tracers.runners.functions", os.path.join(work, "records")],
            binds=binds,
            env={
                "PYTHONPATH": TRACERS_PARENT,
                "PYTHONHASHSEED": "0",
                "PYTHONDONTWRITEBYTECODE": "1",
                "HOME": work,
                "TMPDIR": work,
                **({SEAL_STREAMS_ENV: "1"} if sandbox.seals_streams else {}),
            },
            cwd=work,
            limits=replace(sandbox.limits, output_tail_bytes=64 << 10),
        )
        self.reader = FrameReader(self.process.stdout, settings.max_bytes + FRAME_SLACK)
        self.sent = 0
        self.start_margin_s = START_MARGIN_S
        config = dict(settings.runner_config(), private_scratch=sandbox.scratch is not None)
        self._send(command("config", 0, json.dumps(config).encode()), time.monotonic() + START_MARGIN_S)

    def _run(self, payload: bytes) -> RecordOutput | Blamed:
        """Send one record and read its frames until `done`; the runner is replaced after anything else."""
        settings = self.settings
        number = self.sent
        runs = 2 if settings.check_parity else 1
        budget_s = settings.record_timeout_s * runs + RECORD_MARGIN_S + self.start_margin_s
        deadline = time.monotonic() + budget_s
        self.start_margin_s = 0.0
        assert self.reader is not None
        self.sent += 1
        output, started = RecordOutput(), False
        try:
            self._send(command("record", number, payload), deadline)
            while True:
                kind, sent_number, body = self.reader.next(deadline)
                if sent_number != number or (kind == "start") == started:
                    raise StreamBroken(f"frame {kind} {sent_number} out of order (record {number} in flight)")
                if kind == "start":
                    started = True
                elif kind == "trace":
                    output.trace = body
                elif kind == "ended":
                    output.ended = body.decode("ascii", "replace")[:64]
                elif kind == "traced":
                    wanted = output.trace is not None and ended_by_itself(output.trace)
                    again = command("parity", number, payload) if wanted else command("finish", number)
                    self._send(again, deadline)
                elif kind == "parity":
                    output.parity = body
                elif kind == "scratch":
                    output.scratch_full = True
                elif kind == "done":
                    return output
                elif kind == "restart":
                    return self._blame(None, started=False)
        except StreamBroken as broken:
            past = time.monotonic() >= deadline
            return self._blame(f"wall-clock limit of {budget_s:g}s exceeded" if past else str(broken), started)
        raise AssertionError("unreachable")

    def _send(self, data: bytes, deadline: float) -> None:
        assert self.process is not None
        write_all(self.process.stdin, data, deadline)

    def _blame(self, cause: str | None, started: bool) -> Blamed:
        assert self.process is not None
        result = self.process.stop(cause or "the runner asked for a fresh sandbox")
        self.process = None
        self.close()
        return Blamed(result, started)


_warm: dict[tuple, RunnerSession] = {}


def warm_session(sandbox: Sandbox, settings) -> RunnerSession:
    """This process's runner for `sandbox` and `settings`: the warm one when they are unchanged, else a new
    one (the previous runner is stopped: one runner per worker process, so one sandbox uid's worth)."""
    key = (type(sandbox).__name__, repr(sandbox), settings)
    session = _warm.get(key)
    if session is None:
        close_warm_sessions()
        session = _warm[key] = RunnerSession(sandbox, settings)
    session.sandbox = sandbox
    return session


@atexit.register
def close_warm_sessions() -> None:
    """Stop this process's warm runner, if any (at exit, or before a test looks for leftover processes)."""
    while _warm:
        _warm.popitem()[1].close()
