"""The host decodes event lines in C where it can (`tracefile.fast_event`, msgspec) and the exact way
(`load_line`, then `parse_event`) otherwise: for every line, both give the same event or the same error."""

import pytest

from pipeline.stages.repos.stream import parse_repo_stream
from pipeline.stages.tracefile import REFUSED, TraceFormatError, fast_event, load_line, parse_event, parse_trace_file

LINES = [
    b'[0,"call",0,null,0,1,"f","def f(a):",[["a","1"]],null]',
    b'[0,"call",0,null,0,1,"f","caf\xc3\xa9",[["a","\\u00e9"]],null]',
    b'[0,"call",0,null,0,1,"f","x",[["a","\\udcff"]],null]',  # a lone surrogate: cleaned
    b'[0,"call",0,null,0,1,"f","x",[["\\ud800","1"]],null]',
    b'[0, "line", 0, null, 0, 1, "f", "x", [], null] ',
    b'[18446744073709551616,"call",0,null,0,1,"f","x",[],null]',  # past 64 bits
    b'[0,"call",18446744073709551616,null,0,1,"f","x",[],null]',
    b'[0,"call",2147483648,null,0,1,"f","x",[],null]',
    b'[0,"call",0,-1,0,1,"f","x",[],null]',
    b'[true,"call",0,null,0,1,"f","x",[],null]',
    b'[0.0,"call",0,null,0,1,"f","x",[],null]',
    b'[0,"jump",0,null,0,1,"f","x",[],null]',
    b'[0,["call"],0,null,0,1,"f","x",[],null]',
    b'[0,"call",0,null,0,1,"f","x",[["a","1","2"]],null]',
    b'[0,"call",0,null,0,1,"f","x",[["a",1]],null]',
    b'[0,"call",0,null,0,1,"f","x",{"a":"1"},null]',  # a delta with no event before
    b'[0,"call",0,null,0,1,"f","x",[],NaN]',
    b'[0,"call",0,null,0,1,"f","x",[],null] [1]',
    b'[0,"call",0,null,0,1,"f","x",[],null,]',
    b'[0,"call",0,null,0,1,"f","\xff",[],null]',
    b'[0,"call",0,null,0,1,"f","x",[],null,1]',
    b"[" * 5000 + b"]" * 5000,
]


def exact(raw: bytes, frames, number=1, where=""):
    """The event, or the error's text, of the exact way: `load_line`, then `parse_event`."""
    try:
        return parse_event(load_line(raw, number), 0, where, frames)
    except TraceFormatError as error:
        return f"error: {error}"


@pytest.mark.parametrize("raw", LINES, ids=range(len(LINES)))
@pytest.mark.parametrize("frames", [None, {}], ids=["repository", "function"])
def test_a_line_decodes_as_the_exact_way_decodes_it(raw, frames):
    try:
        fast = fast_event(raw, 0, None if frames is None else {})
    except REFUSED:
        return  # left to the exact way
    assert fast == exact(raw, frames)


@pytest.mark.parametrize("raw", LINES, ids=range(len(LINES)))
def test_a_trace_file_parses_as_line_by_line(raw):
    header = b'{"type": "header"}\n{"type": "start"}\n'
    end = b'\n{"type": "end", "exit": "normal", "truncated": false}\n'
    expected = exact(raw, {}, number=2)
    try:
        parsed = parse_trace_file(header + raw + end, 10).events[0]
    except TraceFormatError as error:
        parsed = f"error: {error}"
    assert parsed == expected


@pytest.mark.parametrize("raw", LINES, ids=range(len(LINES)))
def test_a_repository_stream_parses_as_line_by_line(raw):
    stream = parse_repo_stream(b'{"type": "header"}\n{"type": "test", "nodeid": "t"}\n' + raw + b"\n", 10)
    expected = exact(raw, None, number=3, where="line 3: ")
    if isinstance(expected, str):
        assert f"error: {stream.error}" == expected
    else:
        assert stream.error is None and stream.tests[0].events == [expected]
