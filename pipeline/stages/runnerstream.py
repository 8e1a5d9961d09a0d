"""The host's side of the function runner's protocol (tracers/runners/protocol.py): its frames, read from
the runner's stdout as they come, strictly.

Only the runner writes the stream, but it comes out of a sandbox, so it is read as untrusted: each header
well formed, each payload within its size, each record number the one in flight. The first frame that
breaks a rule ends the runner (`StreamBroken`); what was finished before it is kept. What a record's frames
say is judged per record by the stage.
"""

import json
import os
import re
import select
import time
from dataclasses import dataclass

_HEADER = re.compile(rb"(start|trace|ended|traced|parity|replaced|scratch|done|restart) (\d{1,12}) (\d{1,12})\n")
MAX_HEADER = 48


class StreamBroken(Exception):
    """The runner's stream ended, stalled past its deadline or broke the protocol; says which."""


@dataclass
class RecordOutput:
    """What the runner sent for one finished record: its trace (None when the record removed or replaced
    its trace file), how its child ended, its parity file, and whether it was stopped for filling the
    scratch filesystem."""

    trace: bytes | None = None
    ended: str = ""
    parity: bytes | None = None
    scratch_full: bool = False

    def closed_trace(self) -> bytes | None:
        """The trace with an end object added when the child wrote none (killed, crashed, out of memory);
        a torn last line is left for the strict parser to drop."""
        data = self.trace
        if data is None:
            return None
        last = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        if last.startswith(b"{") and (b'"type": "end"' in last or b'"type": "failure"' in last):
            return data
        reason = self.ended or "runner_gave_no_reason"
        end = (
            {"type": "end", "exit": "never", "truncated": True, "reason": reason}
            if b'"type": "start"' in data[:4096]
            else {"type": "failure", "stage": "setup", "error_type": "Killed", "message": reason}
        )
        torn = data and not data.endswith(b"\n")
        return data + (b"\n" if torn else b"") + json.dumps(end).encode() + b"\n"


def ended_by_itself(trace: bytes) -> bool:
    """Whether the traced call returned or raised (not cut by a budget or killed): only then is there a
    result to compare with an untraced run. The stage checks the trace strictly later; this only decides
    whether to ask for that run."""
    try:
        end = json.loads(trace.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    except ValueError:
        return False
    return type(end) is dict and end.get("type") == "end" and end.get("exit") in ("normal", "error")


class FrameReader:
    """Frames from the non-blocking descriptor `fd`, each within `max_payload` bytes."""

    def __init__(self, fd: int, max_payload: int):
        self._fd = fd
        self._max_payload = max_payload
        self._buffer = bytearray()

    def next(self, deadline: float) -> tuple[str, int, bytes]:
        """The next frame (kind, number, payload); StreamBroken at end of stream, past `deadline`
        (time.monotonic), or on a frame that breaks the rules."""
        while True:
            match = _HEADER.match(self._buffer, 0, MAX_HEADER)
            if match is not None:
                length = int(match.group(3))
                if length > self._max_payload:
                    raise StreamBroken(f"a {length}-byte frame, over the {self._max_payload}-byte limit")
                end = match.end() + length
                if len(self._buffer) >= end:
                    frame = match.group(1).decode(), int(match.group(2)), bytes(self._buffer[match.end() : end])
                    del self._buffer[:end]
                    return frame
            elif b"\n" in self._buffer[:MAX_HEADER] or len(self._buffer) >= MAX_HEADER:
                raise StreamBroken(f"a malformed frame header {bytes(self._buffer[:MAX_HEADER])!r}")
            self._fill(deadline)

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self._fd], [], [], left)[0]:
            raise StreamBroken("the runner sent nothing before its deadline")
        try:
            chunk = os.read(self._fd, 1 << 20)
        except BlockingIOError:
            return
        if not chunk:
            raise StreamBroken("the runner's stream ended")
        self._buffer += chunk


def write_all(fd: int, data: bytes, deadline: float) -> None:
    """Write `data` whole to the non-blocking descriptor `fd` by `deadline`; StreamBroken otherwise."""
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], left)[1]:
            raise StreamBroken("the runner took no input before its deadline")
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue
        except OSError as error:
            raise StreamBroken(f"the runner's input is closed ({error})") from error
