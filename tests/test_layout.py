"""The layout rules of docs/architecture.md, checked: no import cycle among the project's modules, every module
imports alone, each layer of §3 imports only the rows above it and never what its row says it never imports (Ray
included), and a module over ~400 lines is one that does a single job (listed below with that job). The graph is
tests/import_graph.py's: every import counts, inside functions and under TYPE_CHECKING too."""

import ast
import re
import subprocess
import sys

from import_graph import PACKAGES, ROOT, cycles, import_graph, import_statements, project_modules

MAX_LINES = 400
# Modules over MAX_LINES, each with the one job that keeps it whole.
LONG_MODULES = {
    "pipeline.debugger.language": "the formal language's one token table, with serialize and its exact inverse parse",
    "pipeline.sandbox.docker": "the Docker sandbox backend; its helpers serve only it",
    "pipeline.stages.dedup_distributed": "dedup's distributed resolution: bands, union-find, scatter, resolve tasks",
    "pipeline.stages.go.runs": "running one Go program N times in the sandbox and the rows of its runs",
    "tracers.install.sources": "reading where a repository declares its test requirements",
    "tracers.suite.entry_tracer": "the entry tracer, inline on purpose: a helper frame moves where a trace is cut",
    "tracers.trace.tracer": "the capture and its settrace delivery, inline on purpose like the entry tracer",
}

# docs/architecture.md §3's rows, top first: a module is in the row of the longest name that prefixes it, and imports
# only its own row and the rows above it.
LAYERS = (
    ("tracers",),
    ("schemas",),
    ("pipeline.writers",),
    ("pipeline.engine",),
    ("pipeline.debugger",),
    ("pipeline.goscheduler",),
    ("pipeline.format",),
    ("pipeline.sandbox",),
    ("pipeline.sources",),
    ("pipeline.stages",),
    ("pipeline.kinds",),
    ("pipeline.loader",),
    ("pipeline.model",),
    ("pipeline.evaluation",),
    ("pipeline.pretrain",),
    (
        "pipeline",
        "pipeline.refresh",
        "pipeline.export",
        "pipeline.ablate",
        "pipeline.inspect",
        "pipeline.version_report",
        "pipeline.compact",
        "pipeline.cli",
        "pipeline.pretrain.command",  # the pretrain and evaluate commands' options, beside cli.py
    ),
)
# §3's "never imports" column: layer -> the rows above it that it still must not import.
NEVER_IMPORTS = {
    "schemas": ("tracers",),
    "pipeline.writers": ("tracers", "schemas"),
    "pipeline.engine": ("tracers",),
    "pipeline.debugger": ("tracers", "pipeline.writers", "pipeline.engine"),
    "pipeline.goscheduler": ("tracers", "pipeline.writers", "pipeline.engine", "pipeline.debugger"),
    "pipeline.format": ("tracers", "pipeline.writers", "pipeline.engine"),
    "pipeline.sandbox": ("pipeline.debugger", "pipeline.goscheduler", "pipeline.format"),
    "pipeline.sources": ("pipeline.debugger", "pipeline.goscheduler", "pipeline.format"),
    "pipeline.loader": (
        "tracers",
        "pipeline.debugger",
        "pipeline.sandbox",
        "pipeline.sources",
        "pipeline.stages",
        "pipeline.kinds",
    ),
    "pipeline.model": ("tracers", "pipeline.sandbox", "pipeline.sources", "pipeline.stages", "pipeline.kinds"),
    "pipeline.evaluation": ("pipeline.writers", "pipeline.stages", "pipeline.kinds"),
    "pipeline.pretrain": ("tracers", "pipeline.sandbox", "pipeline.sources", "pipeline.stages", "pipeline.kinds"),
}
# The crossings §3 allows in spite of the column above, each with its reason.
ALLOWED = {
    ("pipeline.evaluation", "pipeline.stages.trace_functions"): "a benchmark's items are traced as function records",
}
# The only modules that know a shard's file name: the reader that parses it and the writers that make it.
SHARD_NAMERS = {"pipeline.engine.reader", "pipeline.writers.parquet", "pipeline.engine.compaction.files"}
SHARD_PREFIXES = ("part-", "compact-")
_SHARD_PATTERN = re.compile(r"(?:part|compact)-.*(?:\\d|\\\.|\(\?|\[)")  # a regular expression over shard names
_STRING_TESTS = {"startswith", "endswith", "removeprefix", "removesuffix", "split", "rsplit", "partition", "find"}
# The only modules that import Ray: the engine's one Ray module and Ray Train's two.
RAY_MODULES = {"pipeline.engine.orchestrate", "pipeline.pretrain.launch", "pipeline.pretrain.train"}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_cycle_finder_sees_a_cycle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle_among_the_project_modules():
    assert cycles(import_graph(project_modules())) == []


def _row(module: str) -> int:
    """The index in LAYERS of the row a module belongs to."""
    return max(
        ((len(name), row) for row, names in enumerate(LAYERS) for name in names if _within(module, name)),
        default=(0, len(LAYERS)),
    )[1]


def test_each_layer_imports_only_the_rows_above_it():
    graph = import_graph(project_modules())
    upward = sorted(
        (module, imported) for module, imports in graph.items() for imported in imports if _row(imported) > _row(module)
    )
    assert upward == []


def test_each_layer_never_imports_what_the_architecture_forbids():
    graph = import_graph(project_modules())
    crossings = sorted(
        (module, imported)
        for module, imports in graph.items()
        for layer, never in NEVER_IMPORTS.items()
        if _within(module, layer) and _row(module) == _row(layer)
        for imported in imports
        if any(_within(imported, forbidden) for forbidden in never)
        and not any(_within(imported, allowed) for (owner, allowed) in ALLOWED if owner == layer)
    )
    assert crossings == []


def test_the_graph_counts_imports_in_functions_and_under_type_checking():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\ndef f():\n    from b import c\n"
    names = [
        node.names[0].name if isinstance(node, ast.Import) else node.module
        for node in import_statements(ast.parse(source))
    ]
    assert sorted(names) == ["a", "b", "typing"]


def shard_name_parsers(tree: ast.AST) -> list[str]:
    """The regular expressions over shard names (`part-…`, `compact-…`) in a module, and its string tests of them
    (`name.startswith("part-")`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SHARD_PATTERN.search(node.value):
            found.append(node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STRING_TESTS:
            found += [
                arg.value
                for arg in node.args
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith(SHARD_PREFIXES)
            ]
    return found


def test_shard_names_are_parsed_by_the_reader_alone():
    assert shard_name_parsers(ast.parse('re.compile(r"part-(\\d+)-\\d+\\.parquet")\nname.startswith("compact-")\n'))
    parsers = {
        module: found
        for module, path in project_modules().items()
        if module not in SHARD_NAMERS and (found := shard_name_parsers(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert parsers == {}, "read what wrote a shard with pipeline.engine.reader.shard_writer / shards_by_writer"
    assert shard_name_parsers(ast.parse((ROOT / "pipeline/engine/reader.py").read_text(encoding="utf-8")))


def test_only_the_engines_ray_module_and_ray_train_import_ray():
    importers = {
        module
        for module, path in project_modules().items()
        for node in import_statements(ast.parse(path.read_text(encoding="utf-8")))
        for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""])
        if name == "ray" or name.startswith("ray.")
    }
    assert importers == RAY_MODULES


# Imports the third-party packages once, then imports each project module in a fresh fork, so that a module which
# only imports because another project module happened to be imported first fails here.
_IMPORT_ALONE = """
import importlib, os, sys, traceback
modules, third_party = sys.argv[1].split(","), sys.argv[2].split(",")
for name in third_party:
    try:
        importlib.import_module(name)
    except Exception:
        pass
failed = []
for module in modules:
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(module)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0:
        failed.append(module)
print("FAILED:" + ",".join(failed))
"""


def test_every_module_imports_alone():
    modules = project_modules()
    third_party = set()
    for path in modules.values():
        for node in import_statements(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if isinstance(node, ast.Import) or not node.level:
                third_party.update(name for name in names if name.split(".")[0] not in PACKAGES)
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALONE, ",".join(sorted(modules)), ",".join(sorted(third_party - {""}))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().splitlines()[-1] == "FAILED:", result.stderr[-4000:]


def test_long_modules_do_one_job():
    long = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in project_modules().items()
        if len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES
    }
    unlisted = {name: lines for name, lines in long.items() if name not in LONG_MODULES}
    assert not unlisted, f"split these along their seams, or list the one job each does in LONG_MODULES: {unlisted}"
    assert not set(LONG_MODULES) - set(long), "LONG_MODULES lists modules that are no longer long"
