"""The parser of the runner's result stream keeps what came whole before the first broken frame, and says
which record was in flight when the stream stopped."""

from pipeline.stages.runnerstream import RecordOutput, parse_runner_stream


def frame(kind: str, number: int, payload: bytes = b"") -> bytes:
    return b"%s %06d %d\n" % (kind.encode(), number, len(payload)) + payload


FINISHED = frame("start", 0) + frame("trace", 0, b"T0\n") + frame("parity", 0, b"P0\n") + frame("done", 0)


def test_finished_records_and_the_one_in_flight():
    stream = parse_runner_stream(FINISHED + frame("start", 1) + frame("trace", 1, b"T1"), 3, 100)
    assert stream.finished == [RecordOutput(b"T0\n", b"P0\n")]
    assert (stream.in_flight, stream.restart) == (1, None)


def test_replaced_scratch_and_restart_frames():
    data = FINISHED + frame("start", 1) + frame("replaced", 1) + frame("done", 1)
    data += frame("start", 2) + frame("scratch", 2) + frame("done", 2) + frame("restart", 3)
    stream = parse_runner_stream(data, 5, 100)
    assert stream.finished[1:] == [RecordOutput(), RecordOutput(scratch_full=True)]
    assert (stream.in_flight, stream.restart) == (None, 3)


def test_parsing_stops_at_the_first_broken_frame():
    broken = [
        frame("start", 1) + b"trace 000001 99\nshort",  # torn payload
        frame("start", 2),  # out of order
        frame("trace", 1, b"T1"),  # outcome before start
        frame("start", 1) + frame("trace", 1, b"x" * 101),  # over the size cap
        frame("start", 1) + b"forged 000001 0\n",  # unknown kind
        frame("start", 9),  # beyond the request
    ]
    for tail in broken:
        stream = parse_runner_stream(FINISHED + tail, 3, 100)
        assert stream.finished == [RecordOutput(b"T0\n", b"P0\n")], tail
        assert stream.in_flight in (None, 1) and stream.restart is None
