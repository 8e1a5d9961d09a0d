"""The job driver shared by every kind: check the machine and the output, run the units, write the manifest last."""

import functools
import hashlib
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pyarrow.fs as pafs

from pipeline.engine.compaction.commit import compact_and_commit
from pipeline.engine.compaction.files import sweep_unlisted
from pipeline.engine.compaction.settings import CompactionSettings
from pipeline.engine.config import KindConfig
from pipeline.engine.dataset import UnitRecord, write_manifest, write_text
from pipeline.engine.executor import Produce, Unit, execute_unit
from pipeline.engine.kind import C, JobKind, Throughput
from pipeline.engine.memory import OOM_RETRIES, UnitMemory, check_memory_settings
from pipeline.engine.orchestrate import run_units, start_ray
from pipeline.engine.progress import Progress
from pipeline.engine.reader import MANIFEST, open_root, read_manifest, read_text


def code_version() -> str:
    """The package version, plus the git commit when running from a checkout."""
    try:
        text = version("tracegen")
    except PackageNotFoundError:
        text = "unknown"
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{text}+{commit}" if commit else text


def prepare_output(out: str, config_hash: str, overwrite: bool) -> None:
    """Refuse an unwritable output or one holding another config's dataset (unless overwrite)."""
    try:
        fs, root = open_root(out)
        fs.create_dir(root, recursive=True)
        write_text(fs, f"{root}/.write-probe", "ok")
        fs.delete_file(f"{root}/.write-probe")
    except OSError as error:
        raise ValueError(f"output {out!r} is not writable ({error}); choose another --out") from error
    foreign = foreign_config_hashes(fs, root, config_hash)
    if not foreign:
        return
    if not overwrite:
        raise ValueError(
            f"output {out!r} already holds a dataset (or the finished units of an interrupted "
            f"run) made with another config (hash {', '.join(sorted(foreign))}, this job: "
            f"{config_hash}); choose another --out or pass --overwrite to replace it"
        )
    # Un-commit first: were the driver killed while deleting, no manifest would be left listing deleted shards.
    fs.delete_file(f"{root}/{MANIFEST}")
    for info in fs.get_file_info(_selector(root)):
        if info.type.name == "Directory":
            fs.delete_dir(info.path)
        else:
            fs.delete_file(info.path)


def foreign_config_hashes(fs, root: str, config_hash: str) -> set[str]:
    """Config hashes other than `config_hash` found at the output: the manifest's, or when there is none
    (a run killed before its commit point), those of the completion records it left."""
    manifest = read_manifest(fs, root)
    if manifest is not None:
        hashes = {str(manifest.get("config_hash"))}
    else:
        infos = fs.get_file_info(pafs.FileSelector(f"{root}/_units", allow_not_found=True))
        texts = [
            read_text(fs, info.path)
            for info in infos
            if info.type == pafs.FileType.File
            and info.base_name.endswith(".json")
            and not info.base_name.startswith(".")
        ]
        hashes = {UnitRecord.from_json(text).config_hash for text in texts if text is not None}
    return hashes - {config_hash}


def _selector(root: str):
    return pafs.FileSelector(root, recursive=False)


def run_job(
    kind: JobKind[C],
    source: str,
    config: C,
    out: str,
    *,
    workers: int | None = None,
    address: str | None = None,
    overwrite: bool = False,
    compaction: CompactionSettings | None = None,
    task_memory_mb: int | None = None,
    oom_retries: int = OOM_RETRIES,
) -> dict:
    """Run a job of `kind` over `source` into the dataset at `out`; returns the manifest.

    The settings and the machine are checked before Ray starts (a ValueError names the option, a SetupError
    what is missing); the kind then plans its units on the driver, and `execute_job` runs them, each with
    `task_memory_mb` (None: the kind's default) and at most `oom_retries` resubmissions for memory.
    """
    check_memory_settings(task_memory_mb, oom_retries)
    kind.preflight(config)
    start_ray(address, workers)
    units = kind.units(source, config)
    produce = functools.partial(kind.produce, config=config)
    return execute_job(
        units,
        produce,
        out,
        config,
        throughput=kind.throughput,
        workers=workers,
        address=address,
        overwrite=overwrite,
        dataset_files=kind.dataset_files(units, config),
        compaction=compaction,
        memory=UnitMemory(task_memory_mb or kind.task_memory_mb, kind.smaller_units),
        oom_retries=oom_retries,
    )


def execute_job(
    units: Sequence[Unit],
    produce: Produce,
    out: str,
    config: KindConfig,
    *,
    throughput: Throughput | None = None,
    workers: int | None = None,
    address: str | None = None,
    overwrite: bool = False,
    dataset_files: dict[str, str] | None = None,
    compaction: CompactionSettings | None = None,
    memory: UnitMemory | None = None,
    oom_retries: int = OOM_RETRIES,
) -> dict:
    """Run every unit (finished ones are skipped), compact (pipeline/engine/compaction/: when `compaction`
    wants it and no unit failed; broken groups always) and commit the dataset by writing its manifest;
    the `dataset_files` (name -> text) are written first and listed in the manifest. Each unit's task has
    `memory` (pipeline/engine/memory.py; None: the default) and at most `oom_retries` resubmissions for it."""
    config_hash = config.hash()
    prepare_output(out, config_hash, overwrite)
    fs, root = open_root(out)
    had_compacted = "compaction" in (read_manifest(fs, root) or {})
    for name, text in (dataset_files or {}).items():
        write_text(fs, f"{root}/{name}", text)
    work = functools.partial(
        execute_unit, produce=produce, out=out, config_hash=config_hash, zstd_level=config.zstd_level
    )
    records, failed = run_units(
        units,
        work,
        address=address,
        workers=workers,
        progress=Progress(throughput),
        memory=memory or UnitMemory(),
        oom_retries=oom_retries,
    )
    settings = compaction or CompactionSettings()
    if failed:  # compacted once complete, so a resumed job's files are those of one run from scratch
        settings = replace(settings, mode="never")
    manifest, committed = compact_and_commit(
        fs,
        root,
        records,
        settings,
        config.zstd_level,
        lambda records, extra: write_manifest(
            fs,
            root,
            records,
            kind=config.kind,
            config=config.as_dict(),
            config_hash=config_hash,
            seed=config.seed,
            code_version=code_version(),
            failed_units=failed,
            files={name: hashlib.sha256(text.encode()).hexdigest() for name, text in (dataset_files or {}).items()},
            extra=extra,
        ),
        uri=out,
        persist_records=True,
    )
    if had_compacted:  # a group whose units all ran again left files no record lists
        sweep_unlisted(fs, root, committed)
    if failed:
        raise JobIncomplete(incomplete_message(failed, len(units), out))
    return manifest


def incomplete_message(failed: dict[str, str], total: int, out: str) -> str:
    """Which units failed and why (the first few), and what to do."""
    shown = sorted(failed)[:5]
    reasons = "".join(f"\n  {unit_id}: {failed[unit_id]}" for unit_id in shown)
    more = f"\n  ... and {len(failed) - len(shown)} more (the manifest's failed_units)" if failed.keys() - shown else ""
    return (
        f"{len(failed)} of {total} units failed; the dataset at {out!r} holds the others:{reasons}{more}\n"
        f"run the same command again to complete it (finished units are skipped; a unit that failed for "
        f"memory needs what its line says first)"
    )


class JobIncomplete(RuntimeError):
    """Some units failed even after their retries; the manifest lists them and holds everything else."""
