"""No option is declared outside its config: every option of a job kind and of `tracegen refresh` is a setting its
configs declare (pipeline/engine/config.py `setting`), the option naming the job's input, or a run option (where
the job reads, writes and runs: never hashed); no `add_argument` in pipeline/kinds/ or pipeline/refresh/ declares
a setting; and the options' defaults are the configs' own."""

import argparse
import ast
from pathlib import Path

import pytest

from pipeline.cli import add_run_options, build_parser
from pipeline.compact import add_compaction_options
from pipeline.engine.options import CommandOptions
from pipeline.kinds import KINDS
from pipeline.kinds.functions import FunctionsConfig
from pipeline.kinds.go import GoConfig
from pipeline.kinds.repos import ReposConfig
from pipeline.refresh.command import SETTINGS, configs_from

ROOT = Path(__file__).resolve().parents[2]
# What a refresh is told besides the kinds' settings: its sources and root, how many versions it keeps, whether
# it writes a report, and where it runs (Ray, memory per unit); its compaction options are compact.py's.
REFRESH_OWN = {"--sources", "--root", "--keep", "--no-report", "--workers", "--ray-address"}
MEMORY = {"--task-memory-mb", "--oom-retries"}


def subcommand(name: str) -> argparse.ArgumentParser:
    found = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return found.choices[name]


def flags(parser: argparse.ArgumentParser) -> set[str]:
    """Each option's flag (its first: `--rewrite` of `--rewrite/--no-rewrite`), but --help."""
    return {action.option_strings[0] for action in parser._actions if action.option_strings} - {"-h"}


def options_of(add) -> set[str]:
    parser = argparse.ArgumentParser()
    add(parser)
    return flags(parser)


def kind_settings(kind) -> set[str]:
    return {offered.flag for offered in CommandOptions((kind.config_type,)).declared()}


def offered() -> dict[str, set[str]]:
    """Each command's settings: the kinds' and the refresh's."""
    return {**{kind.command: kind_settings(kind) for kind in KINDS}, "refresh": {o.flag for o in SETTINGS.declared()}}


@pytest.mark.parametrize("kind", KINDS, ids=[kind.command for kind in KINDS])
def test_every_option_of_a_kind_is_its_input_a_setting_of_its_config_or_a_run_option(kind):
    settings, run = kind_settings(kind), options_of(add_run_options)
    assert not settings & (run | {kind.source.flag})
    assert flags(subcommand(kind.command)) == settings | run | {kind.source.flag}


def test_every_option_of_refresh_is_a_setting_of_a_kind_it_runs_or_its_own():
    settings = offered()["refresh"]
    own = REFRESH_OWN | MEMORY | options_of(add_compaction_options)
    assert not settings & own
    assert flags(subcommand("refresh")) == settings | own


def test_no_add_argument_in_the_kinds_or_the_refresh_declares_a_setting():
    calls = [
        node
        for package in ("kinds", "refresh")
        for path in sorted((ROOT / "pipeline" / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
    ]
    assert all(isinstance(call.args[0], ast.Constant) for call in calls)  # each flag is written out, so checked
    written = {call.args[0].value for call in calls}  # type: ignore[attr-defined]
    assert written == REFRESH_OWN | MEMORY
    assert not written & set().union(*offered().values())


@pytest.mark.parametrize("kind", KINDS, ids=[kind.command for kind in KINDS])
def test_a_kinds_defaults_are_its_configs_own(kind):
    _, config = kind.configure(build_parser().parse_args([kind.command, kind.source.flag, "x", "--out", "o"]))
    assert config == kind.config_type() and config.hash() == kind.config_type().hash()


def test_the_refreshs_defaults_are_the_kinds_own():
    configs = configs_from(build_parser().parse_args(["refresh", "--sources", "s", "--root", "r"]))
    assert (configs.functions, configs.repos, configs.go) == (FunctionsConfig(), ReposConfig(), GoConfig())


@pytest.mark.parametrize("command", [kind.command for kind in KINDS] + ["refresh"])
def test_each_settings_help_ends_with_its_default_said_once(command):
    settings = offered()[command]
    for action in subcommand(command)._actions:
        if action.option_strings and action.option_strings[0] in settings:
            text = action.help % {"default": action.default}
            assert text.endswith(")") and text.count("(default:") == 1, (action.option_strings, text)
