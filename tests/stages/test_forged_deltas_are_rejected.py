"""The tracer writes only what changed in a frame's locals (tracers/trace/tracer.py); the host rebuilds every
event's full locals and rejects a delta that refers to anything it was not sent: in the strict parser
alone, and end to end in the real bwrap sandbox, where a record that forges one gets a failure row and its
neighbours keep their traces."""

import shutil

import pytest
from hostile_helpers import assert_ordinary_untouched, beside_ordinary, hostile, trace_chunk

from pipeline.stages.repos.stream import parse_repo_stream
from pipeline.stages.tracefile import TraceFormatError, parse_trace_file
from tracers.trace.backends import trace_source

HEADER = b'{"type": "header", "python": "3.11.7", "tracer_version": "4", "repr_mode": "structural"}\n'
START = b'{"type": "start"}\n'
END = b'{"type": "end", "exit": "normal", "truncated": false}\n'
CALL = b'[0,"call",0,null,0,1,"f","def f(a):",[["a","1"],["b","2"]],null]\n'

# id -> (the event lines after the call, what the failure names)
FORGED = {
    "delta_of_a_frame_never_sent": (
        b'[1,"line",1,0,1,2,"g","",{"a":"3"},null]\n',
        "a delta of locals for a frame with no event before",
    ),
    "delta_names_a_local_never_sent": (
        b'[1,"line",0,null,0,2,"f","",{"c":"3"},null]\n',
        "a delta of locals names a local its frame did not have",
    ),
    "delta_names_a_sent_and_an_unsent_local": (
        b'[1,"line",0,null,0,2,"f","",{"a":"3","z":"4"},null]\n',
        "a delta of locals names a local its frame did not have",
    ),
    "delta_value_is_not_a_repr": (b'[1,"line",0,null,0,2,"f","",{"a":3},null]\n', "bad locals"),
    "delta_value_is_null": (b'[1,"line",0,null,0,2,"f","",{"a":null},null]\n', "names a local its frame"),
}


def test_a_delta_rebuilds_the_frames_full_locals():
    line = b'[1,"line",0,null,0,2,"f","  b = 5",{"b":"5"},null]\n[2,"return",0,null,0,3,"f","",{},"5"]\n'
    parsed = parse_trace_file(HEADER + START + CALL + line + END, 100)
    assert [event["locals"] for event in parsed.events] == [
        [("a", "1"), ("b", "2")],
        [("a", "1"), ("b", "5")],
        [("a", "1"), ("b", "5")],
    ]


@pytest.mark.parametrize("name", sorted(FORGED))
def test_the_parser_rejects_a_forged_delta(name):
    lines, cause = FORGED[name]
    with pytest.raises(TraceFormatError, match=cause):
        parse_trace_file(HEADER + START + CALL + lines + END, 100)


def test_a_repository_stream_never_holds_a_delta():
    stream = parse_repo_stream(
        b'{"type": "header"}\n{"type": "test", "nodeid": "t"}\n'
        + CALL
        + b'[1,"line",0,null,0,2,"f","",{"a":"3"},null]\n',
        100,
    )
    assert stream.error is not None and "bad locals" in stream.error


def test_the_tracer_writes_deltas_that_rebuild_to_what_it_saw():
    traced = trace_source(
        "def f(n):\n    xs = []\n    for i in range(n):\n        xs.append(i)\n    return xs\n", "f", "3"
    )
    assert [dict(event["locals"]) for event in traced["events"]][-2:] == [
        {"n": "3", "xs": "[0, 1, 2]", "i": "2"},
        {"n": "3", "xs": "[0, 1, 2]", "i": "2"},
    ]


FORGE = "PAYLOAD = %r\n\ndef f():\n    os.write(trace_fd(), PAYLOAD)\n    os._exit(0)\n"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_record_that_forges_a_delta_gets_a_failure_row_and_costs_no_other_record():
    records = beside_ordinary([hostile(name, FORGE % (CALL + lines + END)) for name, (lines, _) in FORGED.items()])
    rows, failures = trace_chunk(records)
    assert_ordinary_untouched(records, rows)
    assert set(failures) == set(FORGED)
    for name, (_, cause) in FORGED.items():
        failure = failures[name]
        assert (failure["stage"], failure["error_type"]) == ("parse", "BadTraceOutput")
        assert repr(name) in failure["message"] and cause in failure["message"], failure["message"]
