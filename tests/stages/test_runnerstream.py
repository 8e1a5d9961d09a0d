"""The host reads the runner's frames strictly, as they come: a torn, oversized, malformed or late frame ends
the runner (`StreamBroken`) and what came whole before it is kept; a trace without its end object gets one
that says how the child ended."""

import os
import time

import pytest

from pipeline.stages.runnerstream import FrameReader, RecordOutput, StreamBroken


def frame(kind: str, number: int, payload: bytes = b"") -> bytes:
    return b"%s %d %d\n" % (kind.encode(), number, len(payload)) + payload


def reader_of(data: bytes, close: bool = True) -> FrameReader:
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.write(write, data)
    if close:
        os.close(write)
    return FrameReader(read, 100)


def frames(reader: FrameReader) -> list:
    found = []
    while True:
        try:
            found.append(reader.next(time.monotonic() + 0.2))
        except StreamBroken as broken:
            return found + [str(broken)]


def test_frames_come_whole_then_the_end_of_the_stream_is_said():
    data = frame("start", 0) + frame("trace", 0, b"T0\n") + frame("done", 0)
    assert frames(reader_of(data)) == [
        ("start", 0, b""),
        ("trace", 0, b"T0\n"),
        ("done", 0, b""),
        "the runner's stream ended",
    ]


@pytest.mark.parametrize(
    "tail, why",
    [
        (b"trace 1 99\nshort", "ended"),  # torn payload
        (frame("trace", 1, b"x" * 101), "over the 100-byte limit"),
        (b"forged 1 0\n", "malformed frame header"),
        (b"trace -1 0\n", "malformed frame header"),
        (b"x" * 60, "malformed frame header"),
    ],
)
def test_a_broken_frame_ends_the_stream_after_the_whole_ones(tail, why):
    found = frames(reader_of(frame("start", 1) + tail))
    assert found[0] == ("start", 1, b"") and why in found[-1] and len(found) == 2


def test_a_runner_that_sends_nothing_is_past_its_deadline():
    found = frames(reader_of(frame("start", 3), close=False))
    assert found == [("start", 3, b""), "the runner sent nothing before its deadline"]


def test_a_trace_without_its_end_gets_one_naming_how_the_child_ended():
    started = b'{"type": "header"}\n{"type": "start"}\n[0, "call"'
    closed = RecordOutput(trace=started, ended="wall_time_kill").closed_trace()
    assert closed is not None and closed.endswith(
        b'[0, "call"\n{"type": "end", "exit": "never", "truncated": true, "reason": "wall_time_kill"}\n'
    )
    unstarted = RecordOutput(trace=b'{"type": "header"}\n', ended="killed_by_signal_9").closed_trace()
    assert unstarted is not None and b'"error_type": "Killed", "message": "killed_by_signal_9"' in unstarted
    whole = b'{"type": "header"}\n{"type": "start"}\n{"type": "end", "exit": "normal"}\n'
    assert RecordOutput(trace=whole, ended="child_exit_0").closed_trace() == whole
    assert RecordOutput().closed_trace() is None
