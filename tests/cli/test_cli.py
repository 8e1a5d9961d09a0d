"""The command line's contract: one subcommand per job kind, each with its `jobs/` script for `ray job submit`,
and exit statuses that say what went wrong (2: bad input or a machine that lacks something, before any work)."""

import argparse
import json
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline.cli
from pipeline.cli import COMMANDS, DefaultsHelpFormatter, build_parser, main
from pipeline.kinds import KINDS

ROOT = Path(__file__).resolve().parents[2]


def job_script(command: str) -> Path:
    return ROOT / "jobs" / f"{command.replace('-', '_')}.py"


@pytest.mark.parametrize("kind", KINDS, ids=[kind.command for kind in KINDS])
def test_every_kind_is_a_subcommand_with_the_run_options(kind, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([kind.command, "--help"])
    assert exited.value.code == 0
    usage = capsys.readouterr().out
    assert usage.startswith(f"usage: tracegen {kind.command} ")
    for option in ("--out", "--workers", "--ray-address", "--overwrite"):
        assert option in usage


@pytest.mark.parametrize("command", COMMANDS, ids=[command.name for command in COMMANDS])
def test_every_options_help_names_its_default_once(command):
    """`--help` shows each option's default (added where its help does not name one), never twice."""
    parser = argparse.ArgumentParser(prog=command.name, formatter_class=DefaultsHelpFormatter)
    command.add_arguments(parser)
    blocks: dict[str, str] = {}  # option -> its help, whitespace normalised
    option = ""
    for line in parser.format_help().splitlines():
        if re.match(r"  -", line):
            option = line.split()[0].rstrip(",")
            blocks[option] = ""
        elif not line.startswith("   "):
            option = ""  # a group's title or description
        if option:
            blocks[option] = " ".join([blocks[option], *line.split()]).strip()
    for action in parser._actions:
        default = action.default
        if not action.option_strings or default in (None, "", False, [], argparse.SUPPRESS):
            continue
        text = blocks[action.option_strings[0]]
        assert "default" in text.lower(), text
        assert not ("(default: " in text and text.lower().count("default") > 1), text


def test_pretrain_and_evaluate_help_show_their_defaults_and_evaluate_seed_is_not_benchmark_only(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pretrain", "--help"])
    assert "optimizer steps in all (default: 200)" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        build_parser().parse_args(["evaluate", "--help"])
    usage = capsys.readouterr().out
    assert "--seed SEED" in usage.split("--benchmark only:")[0]


def test_kind_commands_are_unique():
    commands = [kind.command for kind in KINDS]
    assert len(set(commands)) == len(commands)


@pytest.mark.parametrize("kind", KINDS, ids=[kind.command for kind in KINDS])
def test_every_kind_has_a_job_script_that_runs_its_command(kind, monkeypatch):
    """`jobs/<command with - as _>.py ARGS` is `tracegen <command> ARGS` (what `ray job submit` runs)."""
    script = job_script(kind.command)
    assert script.is_file(), f"no job script {script.relative_to(ROOT)} for kind {kind.command!r}"
    calls = []
    monkeypatch.setattr(pipeline.cli, "main", lambda argv=None: calls.append(argv) or 7)
    monkeypatch.setattr(sys, "argv", [str(script), "--some", "option"])
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script puts the checkout first on it
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(str(script), run_name="__main__")
    assert exited.value.code == 7 and calls == [[kind.command, "--some", "option"]]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_job_script_runs_as_a_plain_script_from_anywhere(tmp_path, example_records):
    """The one test that runs a `jobs/` script as a program (the cluster tests run them under Ray): from
    another directory, with an embedded Ray of one worker, it writes the dataset and prints the summary."""
    records = [r for r in example_records if not r["id"].startswith("bad_")][:2]
    corpus = tmp_path / "two.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out"
    result = subprocess.run(
        [
            sys.executable,
            str(job_script("trace-functions")),
            "--input",
            str(corpus),
            "--out",
            str(out),
            "--workers",
            "1",
            "--per-trace",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "traces by exit:" in result.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "functions" and manifest["tables"]["traces"]["rows"] == 2


def test_a_machine_that_lacks_something_is_a_setup_error_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    corpus = tmp_path / "one.jsonl"
    corpus.write_text(json.dumps({"id": "a", "code": "def f():\n    return 1\n", "input": ""}) + "\n")
    status = main(["trace-functions", "--input", str(corpus), "--sandbox", "docker", "--out", str(tmp_path / "o")])
    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith("tracegen: setup: sandbox 'docker': no Docker engine answers") and "--sandbox bwrap" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["trace-functions", "--input", "x.jsonl", "--workers", "0"], "--workers must be >= 1, got 0"),
        (["trace-functions", "--input", "x.jsonl", "--chunk-size", "0"], "chunk_size must be a positive int"),
        (["trace-repos", "--manifest", "x.toml", "--max-events", "0"], "max_events and max_bytes must be positive"),
    ],
)
def test_a_bad_setting_is_an_error_before_any_work(argv, words, tmp_path, capsys):
    """(In process; tests/cli/test_preflight.py runs the command line as a program.)"""
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tracegen: error: ") and words in err
    assert not (tmp_path / "o").exists()
