"""The contract every job kind fulfils (pipeline/kinds/); `pipeline.engine.job` runs any kind the same way.

A kind is a small class: its config type (only the settings its units use; its command-line options are made
from them, pipeline/engine/options.py) and the option naming its input, a preflight check of the machine, the
plan of its units, and `produce`, which turns one unit's payload into rows (streamed to the unit's sink). Kinds
are listed explicitly in `pipeline.kinds.KINDS`; the CLI and `jobs/` loop over that list.
"""

import argparse
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pipeline.engine.config import KindConfig, Option
from pipeline.engine.executor import Unit, UnitSink
from pipeline.engine.memory import DEFAULT_TASK_MEMORY_MB
from pipeline.engine.options import CommandOptions, config_from
from pipeline.engine.stats import StageOutput

C = TypeVar("C", bound=KindConfig)


@dataclass(frozen=True)
class Throughput:
    """What the progress line counts per second: `counter` of stage `stage` in each finished unit."""

    stage: str
    counter: str
    label: str


class JobKind(ABC, Generic[C]):
    """One kind of job: a command (`tracegen COMMAND`, `jobs/COMMAND.py` with `-` as `_`) and its units."""

    command: ClassVar[str]
    help: ClassVar[str]
    config_type: ClassVar[type]  # the kind's config class (a KindConfig): its settings are the kind's options
    source: ClassVar[Option]  # the option naming the job's input (required)
    throughput: ClassVar[Throughput]
    # The memory of one unit's Ray task, in MB (--task-memory-mb overrides it): what Ray reserves for the task
    # and where its worker is stopped (pipeline/engine/memory.py). Not hashed: it never changes the rows.
    task_memory_mb: ClassVar[int] = DEFAULT_TASK_MEMORY_MB
    # How a user makes this kind's units smaller when one fails for memory (its option), for the advice.
    smaller_units: ClassVar[str] = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The kind's own options: its input and its config's settings (the run options are the CLI's)."""
        parser.add_argument(self.source.flag, required=True, help=self.source.help)
        CommandOptions((self.config_type,)).add_to(parser)

    def configure(self, args: argparse.Namespace) -> tuple[str, C]:
        """(the input, the config) from parsed options; a ValueError names a bad value and its fix."""
        return getattr(args, self.source.dest), config_from(args, self.config_type)

    def preflight(self, config: C) -> None:
        """Check the machine (sandbox, toolchains) before Ray starts; a SetupError names what is missing."""

    @abstractmethod
    def units(self, source: str, config: C) -> list[Unit]:
        """The job's units, in a deterministic order (runs on the driver; may run Ray tasks)."""

    def dataset_files(self, units: list[Unit], config: C) -> dict[str, str]:
        """The files the dataset holds besides its tables, name -> text (the packing stage's tokenizer): the
        driver writes them before the units run, and the manifest lists their sha256 under `files`."""
        return {}

    @abstractmethod
    def produce(self, payload: Any, unit_id: str, config: C, sink: UnitSink) -> StageOutput:
        """One unit's rows and its stage counters (runs in a Ray task). A kind whose unit can be large writes
        its rows to `sink` in batches as it makes them; rows in the returned tables are written after those."""
