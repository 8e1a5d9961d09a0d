"""Strict parser of the function runner's result stream (its stdout; format in tracers/result_stream.py).

Only the runner writes the stream, but it comes out of a sandbox, so it is parsed as untrusted: frames in
order, one record at a time, each number the next one expected, each payload within its size; parsing stops
at the first frame that breaks the rules (a torn last frame, when the runner was killed while writing it),
and what came before is kept. What a record's frames say is judged per record by the stage.
"""

import re
from dataclasses import dataclass

_HEADER = re.compile(rb"(start|trace|parity|replaced|scratch|done|restart) (\d{6}) (\d{1,12})\n")
_OUTCOMES = frozenset({b"trace", b"parity", b"replaced", b"scratch"})


@dataclass
class RecordOutput:
    """What the runner sent for one finished record: its trace (None when the record removed or replaced
    its trace file), its parity file, and whether it was stopped for filling the scratch filesystem."""

    trace: bytes | None = None
    parity: bytes | None = None
    scratch_full: bool = False


@dataclass
class RunnerStream:
    """The finished records (positions 0..len-1), the position of the record that started and did not
    finish (None if none), and the position from which the runner asked for a fresh sandbox (None if it
    did not)."""

    finished: list[RecordOutput]
    in_flight: int | None
    restart: int | None


def parse_runner_stream(data: bytes, n_records: int, max_frame_bytes: int) -> RunnerStream:
    """The stream of a runner given `n_records` records; no payload may exceed `max_frame_bytes`."""
    finished: list[RecordOutput] = []
    current: RecordOutput | None = None
    offset = 0
    while offset < len(data):
        match = _HEADER.match(data, offset, offset + 40)
        if match is None:
            break
        kind, number, length = match.group(1), int(match.group(2)), int(match.group(3))
        start, offset = match.end(), match.end() + length
        if length > max_frame_bytes or offset > len(data) or number != len(finished) or number >= n_records:
            break
        if kind == b"restart":
            return RunnerStream(finished, None, number)
        if kind == b"start":
            if current is not None:
                break
            current = RecordOutput()
        elif current is None:
            break
        elif kind == b"done":
            finished.append(current)
            current = None
        elif kind in _OUTCOMES:
            payload = data[start:offset]
            if kind == b"trace":
                current.trace = payload
            elif kind == b"parity":
                current.parity = payload
            else:
                current.scratch_full = kind == b"scratch"
    return RunnerStream(finished, len(finished) if current is not None else None, None)
