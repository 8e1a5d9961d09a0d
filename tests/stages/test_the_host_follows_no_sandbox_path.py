"""Issue 10 item 3: records that swap their output directory, their own files or the next record's for links
to a host directory never get a host byte into the dataset, and their neighbours are traced as in process.

The swap itself succeeds (the output directory is the records' own scratch); what stands in its way is that
the runner reads every record's files through its own descriptors and the host reads only the runner's stdout.
"""

import json
import shutil
import warnings

import pytest
from hostile_helpers import assert_ordinary_untouched, beside_ordinary, hostile, trace_chunk

SECRET = "host-secret-7f3a"


@pytest.fixture
def host_dir(tmp_path):
    """A host directory whose files look like a runner's output, with SECRET in every one."""
    directory = tmp_path / "host"
    directory.mkdir()
    header = {"type": "header", "id": SECRET, "tracer_version": SECRET, "python": SECRET, "repr_mode": "user"}
    event = [0, "call", 0, None, 0, 1, "f", SECRET, [["secret", SECRET]], None]
    end = {"type": "end", "exit": "normal", "truncated": False, "result": SECRET}
    trace = "\n".join([json.dumps(header), json.dumps({"type": "start"}), json.dumps(event), json.dumps(end)]) + "\n"
    parity = json.dumps({"type": "parity", "exit": "normal", "result": SECRET}) + "\n"
    for number in range(64):
        (directory / f"{number:06d}.trace").write_text(trace)
        (directory / f"{number:06d}.parity").write_text(parity)
    return directory


def swaps(host: str) -> dict[str, str]:
    """id -> body of f(): hostile records that point paths the host reads at `host`."""
    return {
        "output_directory_swapped_for_a_host_link": (
            "out = os.path.dirname(next_path('trace'))\n    done = []\n    if not os.path.islink(out):\n"
            "        for step in (lambda: os.rename(out, out + '.gone'), lambda: os.symlink(%r, out)):\n"
            "            try:\n                step()\n                done.append('ok')\n"
            "            except OSError as error:\n                done.append(type(error).__name__)\n"
            "    return 1" % host
        ),
        "next_trace_links_to_a_host_file": "plant_link(%r, next_path('trace'))\n    return 1"
        % (host + "/000000.trace"),
        "next_parity_links_to_a_host_file": "plant_link(%r, next_path('parity'))\n    return 1"
        % (host + "/000000.parity"),
        "own_trace_replaced_by_a_host_link": (
            "own = os.readlink('/proc/self/fd/%%d' %% trace_fd())\n    os.remove(own)\n"
            "    os.symlink(%r, own)\n    return 1" % (host + "/000001.trace")
        ),
        "own_trace_replaced_by_a_fifo": (
            "own = os.readlink('/proc/self/fd/%d' % trace_fd())\n    os.remove(own)\n    os.mkfifo(own)\n    return 1"
        ),
        "own_trace_replaced_by_a_directory_of_links": (
            "own = os.readlink('/proc/self/fd/%%d' %% trace_fd())\n    os.remove(own)\n    os.mkdir(own)\n"
            "    os.symlink(%r, own + '/000000.trace')\n    return 1" % (host + "/000000.trace")
        ),
    }


REPLACED_OWN = {
    "own_trace_replaced_by_a_host_link",
    "own_trace_replaced_by_a_fifo",
    "own_trace_replaced_by_a_directory_of_links",
}


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("bwrap", marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap")),
        "process",
    ],
)
def test_no_host_file_reaches_the_dataset_whatever_a_record_links(backend, host_dir, tmp_path):
    before = {path.name: path.read_bytes() for path in host_dir.iterdir()}
    records = beside_ordinary([hostile(name, f"def f():\n    {body}\n") for name, body in swaps(str(host_dir)).items()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the process backend warns that it does not isolate
        rows, failures = trace_chunk(records, backend, check_parity=True)
    assert SECRET not in json.dumps([rows, failures], default=str)
    assert_ordinary_untouched(records, rows)
    assert set(failures) == REPLACED_OWN
    for name in REPLACED_OWN:
        assert failures[name]["error_type"] == "MissingTraceOutput" and repr(name) in failures[name]["message"]
    swapped = dict(rows["output_directory_swapped_for_a_host_link"]["events"][-1]["locals"])["done"]
    assert swapped == "['ok', 'ok']"
    assert {path.name: path.read_bytes() for path in host_dir.iterdir()} == before
