"""A command's options are made from the settings its configs declare, and its configs from the parsed options:
nested settings included, options shaped unlike their field converted both ways, an option two configs share
offered once and made once, and a flag declared twice differently refused."""

import argparse
import operator
from dataclasses import dataclass, field

import pytest

from pipeline.engine.config import Option, setting
from pipeline.engine.options import CommandOptions, config_from

MADE: list[tuple] = []


@dataclass(frozen=True)
class Inner:
    size: int = setting(3, Option("--size", "items per batch"))
    names: tuple = ()
    quiet: bool = True


@dataclass(frozen=True)
class Files:
    paths: tuple = setting((), Option("--files", "files to read", nargs="+", show=list, default_text="none"))

    @classmethod
    def from_options(cls, paths: list[str]) -> "Files":
        MADE.append(tuple(paths))
        return cls(tuple(paths))


INNER_OPTIONS = {
    "names": Option(
        "--names", "comma list of names", parse=lambda given: tuple(n for n in given.split(",") if n), show=",".join
    ),
    "quiet": Option("--loud", "say everything", action="store_true", parse=operator.not_, show=operator.not_),
}


@dataclass(frozen=True)
class First:
    rate: float = setting(0.5, Option("--rate", "how fast"))
    inner: Inner = setting(default_factory=Inner, options=INNER_OPTIONS)
    files: Files = field(default_factory=Files)
    scratch: str = setting("", hashed=False)


@dataclass(frozen=True)
class Second:
    rate: float = setting(0.5, Option("--rate", "how fast"))
    files: Files = field(default_factory=Files)
    count: int = setting(1, Option("--count", "how many"))


def parsed(options: CommandOptions, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    options.add_to(parser)
    return parser.parse_args(argv)


def test_a_config_is_made_from_its_options_nested_ones_included_and_converted():
    args = parsed(CommandOptions((First,)), ["--rate", "2", "--size", "7", "--names", "a,b", "--loud"])
    assert config_from(args, First) == First(2.0, Inner(7, ("a", "b"), False), Files(()))
    assert config_from(parsed(CommandOptions((First,)), []), First) == First()


def test_each_option_takes_its_fields_default_in_its_own_shape_and_says_it_once():
    parser = argparse.ArgumentParser()
    CommandOptions((First,)).add_to(parser)
    actions = {action.option_strings[0]: action for action in parser._actions if action.option_strings}
    assert actions["--names"].default == "" and actions["--loud"].default is False
    assert actions["--files"].default == [] and actions["--rate"].type is float and actions["--size"].type is int
    helps = {flag: action.help % {"default": action.default} for flag, action in actions.items() if flag != "-h"}
    assert helps["--rate"] == "how fast (default: 0.5)" and helps["--loud"] == "say everything (default: off)"
    assert helps["--files"] == "files to read (default: none)"
    assert all(help.count("(default:") == 1 for help in helps.values())


def test_an_option_two_configs_share_is_offered_once_and_made_once():
    MADE.clear()
    both = CommandOptions((First, Second))
    assert [offered.flag for offered in both.declared()].count("--rate") == 1
    first, second = both.build(parsed(both, ["--rate", "3", "--files", "a", "b"]))
    assert first.rate == second.rate == 3.0 and first.files is second.files and MADE == [("a", "b")]


def test_a_command_offers_some_options_under_its_own_flags_and_the_rest_keep_their_defaults():
    some = CommandOptions((First, Second), only=("--count", "--size"), renamed={"--count": "--second-count"})
    assert [offered.flag for offered in some.declared()] == ["--size", "--second-count"]
    first, second = some.build(parsed(some, ["--second-count", "4", "--size", "9"]))
    assert first == First(inner=Inner(size=9)) and second == Second(count=4)


def test_a_flag_declared_twice_differently_is_refused():
    @dataclass(frozen=True)
    class Other:
        rate: float = setting(0.7, Option("--rate", "how fast"))

    with pytest.raises(ValueError, match="--rate is declared twice, differently: First.rate and Other.rate"):
        CommandOptions((First, Other)).declared()
