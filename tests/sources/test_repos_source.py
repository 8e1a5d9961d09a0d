"""The repository manifest: what a valid one gives, and errors that name the file, the key and the line."""

import pytest

from pipeline.sources.repo_manifest import RepoSpec, read_repo_manifest
from tracers.suite.repo_code import DEFAULT_EXCLUDE


def write(tmp_path, text: str) -> str:
    path = tmp_path / "repos.toml"
    path.write_text(text)
    return str(path)


def test_full_manifest(tmp_path):
    path = write(
        tmp_path,
        """
[[repo]]
name = "toolz"
url = "https://example.org/toolz.git"
ref = "1.0.0"
install = ["pip install -e ."]
test = "toolz/tests -k 'not slow'"
include = ["toolz/**"]
exclude = ["toolz/sandbox"]
timeout_s = 120
max_events = 500

[[repo]]
name = "local"
url = "/srv/git/local"
ref = "0123456789abcdef0123456789abcdef01234567"
""",
    )
    first, second = read_repo_manifest(path)
    assert first == RepoSpec(
        name="toolz",
        url="https://example.org/toolz.git",
        ref="1.0.0",
        install=("pip install -e .",),
        test=("toolz/tests", "-k", "not slow"),
        include=("toolz/**",),
        exclude=("toolz/sandbox",),
        timeout_s=120.0,
        max_events=500,
    )
    assert second.install is None and second.test == () and second.exclude == DEFAULT_EXCLUDE
    assert second.input_ref == f"{path}:[[repo]] #2"


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            '[[repo]]\nname = "a"\nurl = "u"\nref = "main"\ntimeout = 5\n',
            r"repos\.toml: \[\[repo\]\] #1 \(a\): unknown key 'timeout'.* \(line 5\)",
        ),
        ('[[repo]]\nname = "a"\nurl = "u"\n', r"#1 \(a\): missing required key 'ref' \(line 1\)"),
        (
            '[[repo]]\nname = "a"\nurl = "u"\nref = "main"\n\n[[repo]]\nname = "b"\nurl = 3\nref = "x"\n',
            r"#2 \(b\): url must be a str, not int \(line 8\)",
        ),
        (
            '[[repo]]\nname = "a"\nurl = "u"\nref = "main"\nmax_events = -1\n',
            r"max_events must be a positive int, got -1 \(line 5\)",
        ),
        ('[[repo]]\nname = "a"\nurl = "u"\nref = "main"\ninclude = "src"\n', r"include must be a list of str"),
        ('[[repo]]\nname = "a"\nurl = "u"\nref = "--upload-pack=x"\n', r"ref .* not start with '-' \(line 4\)"),
        ('[[repo]]\nname = "a b"\nurl = "u"\nref = "main"\n', r"name 'a b' must be"),
        (
            '[[repo]]\nname = "a"\nurl = "u"\nref = "m"\n[[repo]]\nname = "a"\nurl = "v"\nref = "m"\n',
            r"#2 \(a\): name 'a' is already used by \[\[repo\]\] #1 \(line 6\)",
        ),
        ("[settings]\nx = 1\n", r"unknown top-level key 'settings' \(line 1\)"),
        ('[[repo]\nname = "a"\n', r"repos\.toml: not valid TOML: .*line 1"),
    ],
)
def test_errors_name_the_file_the_key_and_the_line(tmp_path, text, expected):
    with pytest.raises(ValueError, match=expected):
        read_repo_manifest(write(tmp_path, text))


def test_missing_file(tmp_path):
    with pytest.raises(ValueError, match=r"cannot read the repository manifest .*nope\.toml"):
        read_repo_manifest(str(tmp_path / "nope.toml"))
