"""The `process` backend: resource limits only, no isolation. For trusted code, opt-in by name."""

import warnings
from dataclasses import dataclass

from pipeline.sandbox.base import Bind, CommandSandbox, SandboxLimits


@dataclass
class ProcessSandbox(CommandSandbox):
    name = "process"

    def __post_init__(self):
        warnings.warn(
            "sandbox 'process' runs code without isolation (rlimits only): use it for trusted code only", stacklevel=3
        )

    def command(
        self, argv: list[str], binds: list[Bind], env: dict[str, str], cwd: str, limits: SandboxLimits, uid: int
    ) -> list[str]:
        return ["env", "-i", "-C", cwd, *(f"{key}={value}" for key, value in env.items()), *argv]
