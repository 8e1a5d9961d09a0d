"""Tracer overhead and host decode cost, side by side in one run.

    .venv/bin/python bench/tracer.py [--repeat 5] [--baseline OLD_TREE]

1. A CPU-bound pure-Python workload (loops, calls, small containers): untraced vs a bare counting settrace
   hook vs tracegen's tracer.
2. A corpus of ~800 small functions (`bench/small_functions.py`, ~14 events each): a minimal recorder
   (`reprlib` reprs of every local, (event, line, locals) tuples in a list) vs tracegen's tracer writing
   its serialised lines to a list.
3. Host decode of that corpus's traces: the strict parse of each function trace file plus its `traces`
   row (`pipeline/stages/tracefile.py`, `trace_functions.trace_row`), and the same calls traced as
   repository entries (`tracers.suite.entry_tracer`, one test per record) parsed and cut
   (`pipeline/stages/repos/stream.py`, `cut.py`): µs per event.

Each variant runs `--repeat` times; the best time is kept (noise on a shared machine only ever adds time).
With `--baseline OLD_TREE` (a worktree of an older commit) both trees are measured in alternating rounds
of subprocesses, each importing its own `tracers` and `pipeline`, and the table shows before and after.
Copy the tables into bench/RESULTS.md.
"""

import argparse
import io
import json
import os
import reprlib
import subprocess
import sys
import tempfile
from pathlib import Path

from small_functions import small_functions
from workload import WORKLOAD, best_of

TREE_ENV = "TRACEGEN_BENCH_TREE"  # the tree whose `tracers` and `pipeline` a measuring run imports
sys.path.insert(0, os.environ.get(TREE_ENV, str(Path(__file__).resolve().parents[1])))

from tracers.json_writers import encode_object  # noqa: E402
from tracers.trace.backends import call_arguments, source_lines  # noqa: E402
from tracers.trace.tracer import TRACER_VERSION, Budgets, Tracer  # noqa: E402

FILENAME = "<bench>"


def load():
    namespace = {}
    exec(compile(WORKLOAD, FILENAME, "exec"), namespace)
    return namespace["f"]


def workload(args):
    """Seconds of the workload untraced, under a bare counting hook and under the tracer; its event count."""
    entry = load()
    lines = WORKLOAD.splitlines()

    untraced = best_of(args.repeat, lambda: entry(args.rounds))

    counted = [0]

    def counting_hook(frame, event, arg):
        if frame.f_code.co_filename != FILENAME:
            return None
        counted[0] += 1
        return counting_hook

    def run_counting():
        counted[0] = 0
        sys.settrace(counting_hook)
        try:
            entry(args.rounds)
        finally:
            sys.settrace(None)

    bare = best_of(args.repeat, run_counting)
    n_events = counted[0]

    def run_tracer():
        sink = io.StringIO()
        tracer = Tracer(
            lambda c: c.co_filename == FILENAME,
            lambda c, n: lines[n - 1],
            lambda line: (sink.write(line), sink.write("\n")),
            budgets=Budgets(max_events=10**9, max_bytes=1 << 40, max_seconds=600),
        )
        outcome = tracer.run(entry, (args.rounds,))
        assert outcome.exit == "normal" and outcome.n_events == n_events, outcome.as_dict()

    traced = best_of(args.repeat, run_tracer)
    return {"untraced": untraced, "bare": bare, "traced": traced, "events": n_events}


CORPUS_FILE = "<tracegen>"
UNBOUNDED = Budgets(max_events=10**9, max_bytes=1 << 40, max_seconds=600)


def load_corpus(records):
    """[(record, entry function, args, kwargs, source lines)] with each record's code compiled once."""
    loaded = []
    for record in records:
        namespace = {"__name__": "__tracegen__"}
        exec(compile(record["code"], CORPUS_FILE, "exec"), namespace)
        args, kwargs = call_arguments(record["input"], namespace)
        loaded.append((record, namespace[record["entry"]], args, kwargs, source_lines(record["code"])))
    return loaded


def record_minimally(loaded):
    """The minimal recorder over the corpus: (event, line, {name: reprlib repr}) per event; its events."""
    events = []
    short = reprlib.repr

    def hook(frame, event, arg):
        if frame.f_code.co_filename != CORPUS_FILE:
            return None
        events.append((event, frame.f_lineno, {name: short(value) for name, value in frame.f_locals.items()}))
        return hook

    for _, entry, args, kwargs, _ in loaded:
        sys.settrace(hook)
        try:
            entry(*args, **kwargs)
        finally:
            sys.settrace(None)
    return len(events)


def trace_corpus(loaded):
    """Each record under tracegen's tracer, its lines kept as the runner writes them: the trace files' bytes."""
    files = []
    for record, entry, args, kwargs, lines in loaded:
        out = [
            json.dumps(
                {
                    "type": "header",
                    "id": record["id"],
                    "tracer_version": TRACER_VERSION,
                    "python": "%d.%d.%d" % sys.version_info[:3],
                    "repr_mode": "structural",
                }
            ),
            encode_object({"type": "start"}),
        ]
        tracer = Tracer(
            lambda c: c.co_filename == CORPUS_FILE,
            lambda c, n, lines=lines: lines[n - 1] if 0 < n <= len(lines) else "",
            out.append,
            budgets=UNBOUNDED,
        )
        outcome = tracer.run(entry, args, kwargs)
        out.append(encode_object(dict(outcome.as_dict(), type="end")))
        files.append(out)
    return files


def decode_functions(records, files):
    """Parse every trace file and build its `traces` row; the events decoded."""
    from pipeline.sources.function_records import FunctionRecord
    from pipeline.stages.trace_functions import trace_row
    from pipeline.stages.tracefile import parse_trace_file

    n_events = 0
    for record, data in zip(records, files, strict=True):
        parsed = parse_trace_file(data, 10_000)
        function = FunctionRecord(record["id"], record["code"], record["input"], record["entry"], "bench")
        n_events += trace_row(function, parsed, "structural")["n_events"]
    return n_events


def repo_stream(records, root):
    """The corpus as one repository's pytest stream: each record's module a file, each call one test."""
    import importlib.util

    from tracers.suite.entry_tracer import EntryTracer
    from tracers.suite.pytest_plugin import Sink, header
    from tracers.suite.repo_code import PathFilter

    buffer = io.StringIO()
    sink = Sink(buffer, 1 << 40)
    header(sink, {})
    tracer = EntryTracer(sink, PathFilter([str(root)], ["**/*.py"], []))
    for number, record in enumerate(records):
        path = root / f"mod{number:04d}.py"
        path.write_text(record["code"])
        spec = importlib.util.spec_from_file_location(f"mod{number:04d}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        args, kwargs = call_arguments(record["input"], vars(module))
        nodeid = f"tests/test_corpus.py::test_{record['id']}"
        sink.obj(type="test", nodeid=nodeid)
        tracer.start()
        try:
            getattr(module, record["entry"])(*args, **kwargs)
        finally:
            tracer.stop()
        sink.obj(type="test_end", nodeid=nodeid, outcome="passed", message=None)
    sink.obj(type="end", exitstatus=0, reason=None)
    return buffer.getvalue().encode()


def decode_repo(data, root, sources=None):
    """Parse the stream and cut its entries into `traces` rows; the events of the rows and of the stream.
    `sources`: a SourceReader whose function texts are already read (as in a suite that calls each
    function many times), else each function's source is read and tokenized here, once."""
    from types import SimpleNamespace

    from pipeline.engine.stats import StageCounters
    from pipeline.sources.repo_manifest import RepoSpec
    from pipeline.stages.repos.cut import EntryCutter
    from pipeline.stages.repos.stream import parse_repo_stream
    from pipeline.stages.repos.suite_run import RepoTraceSettings

    spec = RepoSpec(name="corpus", url="file:///corpus", ref="main")
    cutter = EntryCutter(
        spec,
        SimpleNamespace(path=str(root), commit="0" * 40, url="file:///corpus"),
        RepoTraceSettings(),
        StageCounters("cut"),
    )
    if sources is not None:
        cutter.sources = sources
    stream = parse_repo_stream(data, 10_000, on_test=cutter)
    assert stream.error is None, stream.error
    rows, _ = cutter.finish()
    return sum(row["n_events"] for row in rows), sum(test.n_events for test in stream.tests), cutter.sources


def corpus(args):
    """Seconds of the minimal recorder and of the tracer over the corpus, and of the host's decode."""
    records = small_functions(args.records)
    loaded = load_corpus(records)
    n_recorded = record_minimally(loaded)
    recorder = best_of(args.repeat, lambda: record_minimally(loaded))
    files = trace_corpus(loaded)
    n_traced = sum(len(lines) - 3 for lines in files)
    tracer = best_of(args.repeat, lambda: trace_corpus(loaded))
    blobs = [("\n".join(lines) + "\n").encode() for lines in files]
    n_decoded = decode_functions(records, blobs)
    assert n_decoded == n_traced, (n_decoded, n_traced)
    functions = best_of(args.repeat, lambda: decode_functions(records, blobs))
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as root:
        data = repo_stream(records, Path(root))
        row_events, stream_events, sources = decode_repo(data, Path(root))
        repo = best_of(args.repeat, lambda: decode_repo(data, Path(root)))
        repo_warm = best_of(args.repeat, lambda: decode_repo(data, Path(root), sources))
    return {
        "records": len(records),
        "recorder_events": n_recorded,
        "recorder": recorder,
        "events": n_traced,
        "tracer": tracer,
        "trace_bytes": sum(map(len, blobs)),
        "decode_functions": functions,
        "repo_events": stream_events,
        "repo_row_events": row_events,
        "decode_repo": repo,
        "decode_repo_warm": repo_warm,
    }


def measure(args):
    return {"python": sys.version.split()[0], "workload": workload(args), "corpus": corpus(args)}


def best(runs, *path):
    values = []
    for run in runs:
        for key in path:
            run = run[key]
        values.append(run)
    return min(values)


def report(args, trees):
    """The tables: `trees` is [(label, [measurements, one per round])]."""
    first = trees[0][1][0]
    work, body = first["workload"], first["corpus"]
    print(f"python {first['python']}, best of {args.repeat} x {len(trees[0][1])} rounds")
    print(f"\nworkload f({args.rounds}): {work['events']} events")
    print("| tree | variant | seconds | events/s | × untraced | × bare hook |")
    print("|---|---|---|---|---|---|")
    for label, runs in trees:
        untraced, bare = best(runs, "workload", "untraced"), best(runs, "workload", "bare")
        for name, key in (
            ("untraced", "untraced"),
            ("bare counting settrace hook", "bare"),
            ("tracegen tracer", "traced"),
        ):
            seconds = best(runs, "workload", key)
            print(
                f"| {label} | {name} | {seconds:.4f} | {work['events'] / seconds:,.0f} | "
                f"{seconds / untraced:.1f} | {seconds / bare:.2f} |"
            )
    print(
        f"\ncorpus: {body['records']} small functions, {body['events']} events "
        f"({body['events'] / body['records']:.1f} per function; the recorder sees {body['recorder_events']})"
    )
    print(
        "| tree | recorder s | tracer s | tracer speed ÷ recorder's | trace bytes | "
        "function decode µs/event | repository decode µs/event | the same, sources already read |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, runs in trees:
        recorder, tracer = best(runs, "corpus", "recorder"), best(runs, "corpus", "tracer")
        stats = runs[0]["corpus"]
        print(
            f"| {label} | {recorder:.4f} | {tracer:.4f} | {recorder / tracer:.2f}× | {stats['trace_bytes']:,} | "
            f"{best(runs, 'corpus', 'decode_functions') / stats['events'] * 1e6:.2f} | "
            f"{best(runs, 'corpus', 'decode_repo') / stats['repo_events'] * 1e6:.2f} | "
            f"{best(runs, 'corpus', 'decode_repo_warm') / stats['repo_events'] * 1e6:.2f} |"
        )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--records", type=int, default=800)
    parser.add_argument("--baseline", help="a worktree of an older commit, measured side by side with this one")
    parser.add_argument("--alternations", type=int, default=2, help="rounds of before, after with --baseline")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # one round, JSON out
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args)))
        return
    if args.baseline is None:
        report(args, [("this tree", [measure(args)])])
        return
    here = str(Path(__file__).resolve().parents[1])
    trees = [("before", os.path.abspath(args.baseline), []), ("after", here, [])]
    for _ in range(args.alternations):
        for _, tree, runs in trees:
            command = [
                sys.executable,
                __file__,
                "--measure",
                "--repeat",
                str(args.repeat),
                "--rounds",
                str(args.rounds),
                "--records",
                str(args.records),
            ]
            env = dict(os.environ, **{TREE_ENV: tree})
            runs.append(json.loads(subprocess.run(command, env=env, check=True, capture_output=True).stdout))
    report(args, [(label, runs) for label, _, runs in trees])


if __name__ == "__main__":
    main()
