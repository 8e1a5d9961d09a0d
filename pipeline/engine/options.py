"""The command-line options of a command, made from the settings its configs declare (pipeline/engine/config.py
`setting`), and its configs made back from the parsed options: no option of a setting is written anywhere else.

The options of a config are those of its fields, then those of its nested settings classes' fields, in field
order. A command may offer several configs (a refresh runs three kinds): an option two of them declare (the
sandbox) is offered once and sets both, and its value is made once (the decontaminator, read from its files on
the driver, is the same object in both). It may offer only some of their options (`only`, by flag) and call
some by another flag (`renamed`); a setting it does not offer keeps its default. A nested settings class is made
by its constructor from its options' values, or by its `from_options` classmethod where making it takes more
(a decontaminator reads and indexes its benchmark files).
"""

import argparse
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypeVar

from pipeline.engine.config import Option, default_of, dest, setting_of

T = TypeVar("T")


@dataclass(frozen=True)
class Declared:
    """One option as a command offers it: its declaration, the flag it goes by there, its default as the option
    takes it, and the field it sets (`where`, for messages)."""

    option: Option
    flag: str
    default: Any
    where: str


def _fields(cls: type, extra: Mapping[str, Option]) -> Iterator[tuple[str, Option | None, Any, Mapping[str, Option]]]:
    """(name, option, default, the options of its nested class's fields) of each init field of a settings class."""
    for f in fields(cls):
        if f.init:
            declared = setting_of(f)
            yield f.name, declared.option or extra.get(f.name), default_of(f), declared.options


@dataclass(frozen=True)
class CommandOptions:
    """The options of `configs` a command offers (all of them, or those whose flags are in `only`), with the flags
    `renamed` maps to another."""

    configs: tuple[type, ...]
    only: Collection[str] | None = None
    renamed: Mapping[str, str] = field(default_factory=dict)

    def _offers(self, option: Option) -> bool:
        return self.only is None or option.flag in self.only

    def _flag(self, option: Option) -> str:
        return self.renamed.get(option.flag, option.flag)

    def declared(self) -> list[Declared]:
        """Every offered option once, in field order; a ValueError when one flag is declared twice differently."""
        found: dict[str, Declared] = {}

        def walk(cls: type, where: str, extra: Mapping[str, Option]) -> None:
            for name, option, default, options in _fields(cls, extra):
                if option is None:
                    if is_dataclass(default):
                        walk(type(default), f"{where}.{name}", options)
                    continue
                if not self._offers(option):
                    continue
                shown = option.show(default) if option.show else default
                offered = Declared(option, self._flag(option), shown, f"{where}.{name}")
                first = found.setdefault(offered.flag, offered)
                if (first.option, first.default) != (offered.option, offered.default):
                    raise ValueError(
                        f"{offered.flag} is declared twice, differently: {first.where} and {offered.where}"
                    )

        for config in self.configs:
            walk(config, config.__name__, {})
        return list(found.values())

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        for offered in self.declared():
            option, default = offered.option, offered.default
            if option.default_text:
                shown = option.default_text
            elif option.action is not None:
                shown = "on" if default else "off"
            else:
                shown = "%(default)s"
            arguments: dict[str, Any] = {"default": default, "help": f"{option.help} (default: {shown})"}
            if option.action is not None:
                arguments["action"] = option.action
            elif option.parse is None and type(default) in (int, float):
                arguments["type"] = type(default)
            for name in ("choices", "nargs", "metavar"):
                if getattr(option, name) is not None:
                    arguments[name] = getattr(option, name)
            parser.add_argument(offered.flag, **arguments)

    def build(self, args: argparse.Namespace) -> tuple:
        """Each config made from the parsed options (a ValueError names a bad value and its fix)."""
        made: dict[Any, tuple[Any, frozenset[str]]] = {}

        def value(option: Option) -> Any:
            flag = self._flag(option)
            if flag not in made:
                given = getattr(args, dest(flag))
                made[flag] = (option.parse(given) if option.parse else given, frozenset((flag,)))
            return made[flag]

        def make(cls: type, extra: Mapping[str, Option], top: bool = False) -> tuple[Any, frozenset[str]]:
            """The `cls` its offered options make, and their flags; (None, no flags) when none of them is offered
            (the parent keeps its default)."""
            values, flags = {}, frozenset()
            for name, option, default, options in _fields(cls, extra):
                if option is not None and self._offers(option):
                    values[name], used = value(option)
                elif option is None and is_dataclass(default):
                    values[name], used = make(type(default), options)
                else:
                    continue
                if not used:
                    del values[name]
                flags |= used
            if not flags and not top:
                return None, flags
            if (cls, flags) not in made:
                made[cls, flags] = (getattr(cls, "from_options", cls)(**values), flags)
            return made[cls, flags]

        return tuple(make(config, {}, top=True)[0] for config in self.configs)


def config_from(args: argparse.Namespace, config: type[T]) -> T:
    """The config of type `config` made from the parsed options of all its settings."""
    return CommandOptions((config,)).build(args)[0]
