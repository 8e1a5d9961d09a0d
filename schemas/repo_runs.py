"""The `repo_runs` table: one row per repository of a `trace-repos` job (or refresh), whatever happened to it (one per
piece of a suite the planner split: pipeline/stages/repos/pieces.py).

It is the yield of a corpus at a glance: how each repository was installed (which of the installer's rules
and fallbacks it took, which modules collection asked for), how many tests pytest collected, how many
passed untraced and traced, how many were traced (made at least one trace of a repository function), and
the repository's most frequent failure types (the `failures` rows hold the details). A repository whose
clone or install failed has a row too, with null counts.
"""

import pyarrow as pa

from schemas.fields import field

VERSION = 3

FAILURE_COUNT = pa.struct(
    [
        field("error_type", pa.string(), "a `failures.error_type` of this repository", nullable=False),
        field("n", pa.int64(), "how many of its failure rows have it", nullable=False),
    ]
)

SCHEMA = pa.schema(
    [
        field("unit_id", pa.string(), "the repository's unit", nullable=False),
        field("name", pa.string(), "the manifest's name", nullable=False),
        field(
            "piece",
            pa.string(),
            "`k/n` when the suite was split into n units by test module (this row counts piece k's tests); null "
            "when the repository was one unit",
        ),
        field("source", pa.string(), "where it came from: the git URL, or `sdist:NAME==VERSION`", nullable=False),
        field("commit", pa.string(), "the commit SHA (or the sdist's identity); null when the clone failed"),
        field(
            "install_step",
            pa.string(),
            "which install worked: all (every test requirement found) | without:SOURCE (a source that could "
            "not be resolved left out) | relaxed (pins dropped) | minimal (pytest and the package) | manifest "
            "(the manifest's own `install`); null when no install worked",
        ),
        field(
            "install_sources",
            pa.list_(pa.field("item", pa.string(), nullable=False)),
            "where the test requirements were read from, in the installer's order (e.g. dependency-groups:test, "
            "tox:testenv, requirements-dev.txt)",
            nullable=False,
        ),
        field("editable", pa.bool_(), "whether the package was installed editable; null when not a package"),
        field(
            "install_commands",
            pa.list_(pa.field("item", pa.string(), nullable=False)),
            "the repository's own preparation commands the installer ran after installing (its tox test env's "
            "commands_pre: compiling translations, generating files the tests read), each `COMMAND: ok` or "
            "`COMMAND: failed`",
            nullable=False,
        ),
        field(
            "repaired_modules",
            pa.list_(pa.field("item", pa.string(), nullable=False)),
            "what collection reported missing (modules; plugin options such as --cov) that a repair round then "
            "installed a distribution for",
            nullable=False,
        ),
        field("tests_collected", pa.int64(), "tests pytest collected (first run); null when it never collected"),
        field("tests_passed_untraced", pa.int64(), "tests that passed in the untraced run; null without parity"),
        field("tests_passed_traced", pa.int64(), "tests that passed in the traced run; null when none ran"),
        field(
            "tests_traced",
            pa.int64(),
            "tests that passed untraced (traced, without a parity run or when the untraced run has no test of that id) "
            "and made at least one trace of a repository "
            "function (stored, or identical to one stored); null when none ran",
        ),
        field("traces", pa.int64(), "`traces` rows of this repository", nullable=False),
        field(
            "restarts",
            pa.int64(),
            "runs of the traced suite after the first (a test ended a run, or the trace output filled its budget)",
            nullable=False,
        ),
        field(
            "top_failures",
            pa.list_(pa.field("item", FAILURE_COUNT, nullable=False)),
            "the repository's failure types, most frequent first (up to 5)",
            nullable=False,
        ),
    ]
)
