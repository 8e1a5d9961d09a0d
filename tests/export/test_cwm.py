"""`tracegen export --dialect cwm`: a real trace-functions dataset written as CWM trace-prediction prompts and
completions, read back by the cwm dialect's parser, every frame one of CWM's four frame patterns."""

import json
import re
import shutil

import pyarrow.parquet as pq
import pytest

from pipeline.cli import main
from pipeline.debugger.language import FRAME_SEP, START_MARKER, TRACE_CONTEXT_START, parse

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

RECORDS = [
    {
        "id": "sums",
        "entry": "total",
        "input": "[1, 2]",
        "code": "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n",
    },
    {
        "id": "raises",
        "entry": "check",
        "input": "'<|frame_sep|>'",
        "code": "def helper(t):  # << START_OF_TRACE\n    return len(t)\n\n"
        "def check(text):\n    n = helper(text)\n    raise ValueError(text)\n",
    },
]
# CWM's four frames (PROMPTING_GUIDE.md, "Trace Prediction"); payloads hold no `<|` but escaped ones.
_PAYLOAD = r"(?:[^<]|<(?!\|)|<\|\|)*"
FRAME = re.compile(
    rf"<\|(?:call|line)_sep\|>{_PAYLOAD}<\|action_sep\|>{_PAYLOAD}"
    rf"|<\|(?:return|exception)_sep\|><\|action_sep\|>{_PAYLOAD}<\|arg_sep\|>{_PAYLOAD}"
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, ray_local) -> str:
    root = tmp_path_factory.mktemp("cwm")
    corpus = root / "functions.jsonl"
    corpus.write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
    out = root / "data"
    argv = ["trace-functions", "--input", str(corpus), "--out", str(out), "--workers", "1", "--full-locals"]
    assert main(argv) == 0
    return str(out)


def test_every_trace_is_a_cwm_prompt_and_completion_that_parses_back(dataset, tmp_path, capsys):
    out = tmp_path / "cwm.jsonl"
    assert main(["export", "--dialect", "cwm", "--data", dataset, "--out", str(out)]) == 0
    assert f"2 cwm examples -> {out}" in capsys.readouterr().out
    records = {r["source_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(records) == {"sums", "raises"}
    for record in records.values():
        prompt, completion = record["prompt"], record["completion"]
        assert prompt.startswith(TRACE_CONTEXT_START) and prompt.endswith(FRAME_SEP)
        assert prompt.count(FRAME_SEP) == 1 and prompt.count(START_MARKER) == 1
        episode = parse(prompt + completion, "cwm")
        frames = completion.split(FRAME_SEP)
        assert frames[-1] == "<|end_of_text|>"  # both traces leave the entry scope
        assert all(FRAME.fullmatch(frame) for frame in frames[:-1]), frames
        assert len(frames) - 1 == len(episode.states) - 1
    sums = parse(records["sums"]["prompt"] + records["sums"]["completion"], "cwm")
    assert sums.code.split("\n")[sums.entry_line] == "def total(xs):"
    assert records["sums"]["prompt"].endswith(
        "def total(xs):"
        + START_MARKER
        + "\n    s = 0\n"
        + "    for x in xs:\n        s += x\n    return s\n"
        + FRAME_SEP
    )
    raises = parse(records["raises"]["prompt"] + records["raises"]["completion"], "cwm")
    # the program's own marker is escaped, so the one marker is on the entry's def line
    assert raises.code == RECORDS[1]["code"] and raises.code.split("\n")[raises.entry_line] == "def check(text):"
    assert "def helper(t):  # <<< START_OF_TRACE" in records["raises"]["prompt"]
    assert [s.event for s in raises.states][-2:] == ["exception", "end_of_text"]
    assert raises.states[0].locals == {"text": "'<|frame_sep|>'"}  # escaped in the text, exact once parsed


def test_full_locals_trajectories_write_no_delta(dataset):
    import pathlib

    texts = [
        row["text"]
        for path in sorted(pathlib.Path(dataset, "trajectories").glob("*.parquet"))
        for row in pq.read_table(path).to_pylist()
    ]
    assert texts and all('".."' not in text for text in texts)
    assert all(row.startswith(TRACE_CONTEXT_START) for row in texts)


def test_an_option_of_another_dialect_is_refused_and_nothing_is_written(dataset, tmp_path):
    from pipeline.export import export

    out = tmp_path / "x.jsonl"
    with pytest.raises(ValueError, match="--runtime-goroutines: not an option of the cwm dialect"):
        export("cwm", dataset, str(out), runtime_goroutines=True)
    with pytest.raises(ValueError, match="unknown export dialect 'json'"):
        export("json", dataset, str(out))
    assert not out.exists() and not (tmp_path / "x.jsonl.partial").exists()
